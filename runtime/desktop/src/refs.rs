//! Control refs: the controls of the latest snapshot, each under `r<snapshot>.<index>`. A ref
//! of an older snapshot fails as stale; nothing is ever looked up again by a reusable id.

use crate::DesktopError;
use crate::model::Control;

/// The latest snapshot's controls.
#[derive(Debug, Default)]
pub struct Refs {
    generation: u64,
    window: u64,
    controls: Vec<Control>,
}

impl Refs {
    /// Makes `controls` of `window` the current snapshot; every earlier ref goes stale.
    /// Returns the prefix its refs carry.
    pub fn replace(&mut self, window: u64, controls: Vec<Control>) -> u64 {
        self.generation += 1;
        self.window = window;
        self.controls = controls;
        self.generation
    }

    /// The ref of control `index` of snapshot `generation`.
    pub fn name(generation: u64, index: usize) -> String {
        format!("r{generation}.{index}")
    }

    /// The control `r` names and the window it belongs to.
    pub fn get(&self, r: &str) -> Result<(u64, &Control), DesktopError> {
        let parsed = r
            .trim()
            .strip_prefix('r')
            .and_then(|rest| rest.split_once('.'))
            .and_then(|(g, i)| Some((g.parse::<u64>().ok()?, i.parse::<usize>().ok()?)));
        let Some((generation, index)) = parsed else {
            return Err(DesktopError::Input(format!(
                "ref `{r}` is not a ref from observe (they look like r3.12)"
            )));
        };
        if self.generation == 0 {
            return Err(DesktopError::Gone(format!(
                "ref `{r}`: no control snapshot has been taken; observe a window's controls first"
            )));
        }
        if generation != self.generation {
            return Err(DesktopError::Gone(format!(
                "ref `{r}` is stale: it is from an earlier snapshot (the latest refs are r{}.*); observe the controls again",
                self.generation
            )));
        }
        self.controls
            .get(index)
            .map(|c| (self.window, c))
            .ok_or_else(|| {
                DesktopError::Gone(format!(
                    "ref `{r}`: snapshot r{generation} has no control {index}"
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ControlHandle;

    fn control(name: &str) -> Control {
        Control {
            depth: 0,
            role: "push button".into(),
            name: name.into(),
            value: None,
            states: Vec::new(),
            rect: None,
            can_press: true,
            can_set: false,
            handle: ControlHandle {
                owner: ":1.2".into(),
                path: format!("/{name}"),
            },
        }
    }

    #[test]
    fn refs_of_an_earlier_snapshot_are_stale_even_for_the_same_control() {
        let mut refs = Refs::default();
        assert!(
            refs.get("r1.0")
                .unwrap_err()
                .to_string()
                .contains("no control snapshot")
        );
        let g1 = refs.replace(7, vec![control("ok"), control("cancel")]);
        let r = Refs::name(g1, 1);
        assert_eq!(refs.get(&r).unwrap().1.name, "cancel");
        assert_eq!(refs.get(&r).unwrap().0, 7);
        // The same controls snapshotted again: the old ref still fails.
        let g2 = refs.replace(7, vec![control("ok"), control("cancel")]);
        let e = refs.get(&r).unwrap_err().to_string();
        assert!(
            e.contains("is stale") && e.contains(&format!("r{g2}.*")),
            "{e}"
        );
        assert!(refs.get(&Refs::name(g2, 1)).is_ok());
        assert!(refs.get(&Refs::name(g2, 2)).is_err());
        assert!(
            refs.get("button")
                .unwrap_err()
                .to_string()
                .contains("not a ref")
        );
    }
}
