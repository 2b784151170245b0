//! Screenshot frames: each screenshot the model saw is kept (the most recent [`KEPT`]) with
//! the screen area it shows, its scale and the windows as they stood, so a coordinate it
//! names maps back to the screen exactly and a window that moved since is noticed.

use std::collections::VecDeque;

use crate::DesktopError;
use crate::model::{Rect, WindowInfo};

/// How many recent frames stay usable.
pub const KEPT: usize = 8;

/// One screenshot as the model saw it.
#[derive(Debug, Clone)]
pub struct Frame {
    /// `f<n>`.
    pub id: String,
    /// The screen area it shows.
    pub area: Rect,
    /// Its size in pixels as sent (after any downscale).
    pub width: u32,
    /// See `width`.
    pub height: u32,
    /// The window it was taken of, if one.
    pub window: Option<u64>,
    /// The top-level windows at capture time, topmost first.
    pub windows: Vec<WindowInfo>,
}

impl Frame {
    /// Screen pixels per frame pixel (1.0 when the frame was not downscaled).
    pub fn scale(&self) -> f64 {
        if self.width == 0 {
            return 1.0;
        }
        f64::from(self.area.w) / f64::from(self.width)
    }

    /// The screen point frame pixel `(x, y)` shows.
    pub fn to_screen(&self, x: i64, y: i64) -> Result<(i32, i32), DesktopError> {
        if x < 0 || y < 0 || x >= i64::from(self.width) || y >= i64::from(self.height) {
            return Err(DesktopError::Input(format!(
                "({x}, {y}) lies outside frame {} ({}x{})",
                self.id, self.width, self.height
            )));
        }
        let sx = f64::from(self.area.w) / f64::from(self.width.max(1));
        let sy = f64::from(self.area.h) / f64::from(self.height.max(1));
        // The centre of the frame pixel, so a downscaled click lands inside what it showed.
        let px = (x as f64 + 0.5) * sx - 0.5;
        let py = (y as f64 + 0.5) * sy - 0.5;
        let max_x = f64::from(self.area.w.saturating_sub(1));
        let max_y = f64::from(self.area.h.saturating_sub(1));
        let ox = px.round().clamp(0.0, max_x) as i32;
        let oy = py.round().clamp(0.0, max_y) as i32;
        Ok((
            self.area.x.saturating_add(ox),
            self.area.y.saturating_add(oy),
        ))
    }

    /// The window that showed at screen point `(x, y)` when the frame was taken: the frame's
    /// own window, or the topmost window there.
    pub fn window_at(&self, x: i32, y: i32) -> Option<&WindowInfo> {
        match self.window {
            Some(id) => self.windows.iter().find(|w| w.id == id),
            None => self.windows.iter().find(|w| w.frame.contains(x, y)),
        }
    }
}

/// The recent frames.
#[derive(Debug, Default)]
pub struct Frames {
    next: u64,
    kept: VecDeque<Frame>,
}

impl Frames {
    /// Keeps a new frame and returns its id; the oldest beyond [`KEPT`] is dropped.
    pub fn add(
        &mut self,
        area: Rect,
        (width, height): (u32, u32),
        window: Option<u64>,
        windows: Vec<WindowInfo>,
    ) -> String {
        self.next += 1;
        let id = format!("f{}", self.next);
        if self.kept.len() == KEPT {
            self.kept.pop_front();
        }
        self.kept.push_back(Frame {
            id: id.clone(),
            area,
            width,
            height,
            window,
            windows,
        });
        id
    }

    /// Frame `id`, while it is kept.
    pub fn get(&self, id: &str) -> Result<&Frame, DesktopError> {
        self.kept.iter().find(|f| f.id == id).ok_or_else(|| {
            let newest = self.kept.back().map_or("none yet".to_string(), |f| f.id.clone());
            DesktopError::Gone(format!(
                "frame `{id}` is not one of the last {KEPT} screenshots (newest: {newest}); take a screenshot with observe"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(id: u64, rect: Rect) -> WindowInfo {
        WindowInfo {
            id,
            title: format!("w{id}"),
            app: "app".into(),
            pid: None,
            rect,
            frame: rect,
            focused: false,
        }
    }

    #[test]
    fn coordinates_map_back_through_the_downscale_and_the_origin() {
        let mut frames = Frames::default();
        let area = Rect {
            x: 100,
            y: 50,
            w: 2000,
            h: 1000,
        };
        let id = frames.add(area, (1000, 500), None, Vec::new());
        let f = frames.get(&id).unwrap();
        assert_eq!(f.scale(), 2.0);
        assert_eq!(f.to_screen(0, 0).unwrap(), (101, 51));
        assert_eq!(f.to_screen(999, 499).unwrap(), (2099, 1049));
        assert_eq!(f.to_screen(500, 250).unwrap(), (1101, 551));
        let e = f.to_screen(1000, 0).unwrap_err().to_string();
        assert!(e.contains("outside frame f1 (1000x500)"), "{e}");
        assert!(f.to_screen(-1, 0).is_err());
    }

    #[test]
    fn an_unscaled_frame_maps_one_to_one() {
        let mut frames = Frames::default();
        let id = frames.add(
            Rect {
                x: 0,
                y: 0,
                w: 1280,
                h: 800,
            },
            (1280, 800),
            None,
            Vec::new(),
        );
        let f = frames.get(&id).unwrap();
        for (x, y) in [(0, 0), (17, 33), (1279, 799)] {
            assert_eq!(f.to_screen(x, y).unwrap(), (x as i32, y as i32));
        }
    }

    #[test]
    fn only_the_recent_frames_are_kept_and_an_old_one_says_so() {
        let mut frames = Frames::default();
        let area = Rect {
            x: 0,
            y: 0,
            w: 10,
            h: 10,
        };
        let first = frames.add(area, (10, 10), None, Vec::new());
        for _ in 0..KEPT {
            frames.add(area, (10, 10), None, Vec::new());
        }
        let e = frames.get(&first).unwrap_err().to_string();
        assert!(
            e.contains("not one of the last 8 screenshots (newest: f9)"),
            "{e}"
        );
        assert!(frames.get("f9").is_ok());
        assert!(frames.get("f2").is_ok());
    }

    #[test]
    fn the_window_under_a_point_is_the_topmost_one_then() {
        let mut frames = Frames::default();
        let top = window(
            2,
            Rect {
                x: 50,
                y: 50,
                w: 100,
                h: 100,
            },
        );
        let below = window(
            1,
            Rect {
                x: 0,
                y: 0,
                w: 400,
                h: 400,
            },
        );
        let id = frames.add(
            Rect {
                x: 0,
                y: 0,
                w: 400,
                h: 400,
            },
            (400, 400),
            None,
            vec![top, below],
        );
        let f = frames.get(&id).unwrap();
        assert_eq!(f.window_at(60, 60).map(|w| w.id), Some(2));
        assert_eq!(f.window_at(10, 10).map(|w| w.id), Some(1));
        assert_eq!(f.window_at(500, 10).map(|w| w.id), None);
    }
}
