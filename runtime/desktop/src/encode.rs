//! Screenshots as the model receives them: at most `max_dimension` pixels a side (scaled
//! down, never up), PNG for interfaces and text, JPEG for photo-like content where PNG would
//! be many times larger.

use image::codecs::jpeg::JpegEncoder;
use image::codecs::png::{CompressionType, FilterType, PngEncoder};
use image::{ImageEncoder, RgbaImage};

use crate::DesktopError;

/// An encoded screenshot.
#[derive(Debug, Clone)]
pub struct Encoded {
    /// The image file's bytes.
    pub data: Vec<u8>,
    /// `image/png` or `image/jpeg`.
    pub mime: &'static str,
    /// Its size as sent.
    pub width: u32,
    /// See `width`.
    pub height: u32,
}

/// Distinct colours (at 5 bits a channel) among the sampled pixels past which content is
/// taken as photo-like.
const PHOTO_COLOURS: usize = 1500;
const SAMPLES: u32 = 64;

/// Whether `img` looks like a photo (many distinct colours) rather than an interface.
pub fn photo_like(img: &RgbaImage) -> bool {
    let (w, h) = img.dimensions();
    if w == 0 || h == 0 {
        return false;
    }
    let mut seen = std::collections::HashSet::with_capacity(4096);
    for j in 0..SAMPLES {
        for i in 0..SAMPLES {
            let x = (u64::from(i) * u64::from(w) / u64::from(SAMPLES)) as u32;
            let y = (u64::from(j) * u64::from(h) / u64::from(SAMPLES)) as u32;
            let p = img.get_pixel(x, y).0;
            seen.insert(
                (u32::from(p[0] >> 3) << 10) | (u32::from(p[1] >> 3) << 5) | u32::from(p[2] >> 3),
            );
        }
    }
    seen.len() > PHOTO_COLOURS
}

/// Scales `img` to fit `max_dimension` and encodes it.
pub fn encode(img: &RgbaImage, max_dimension: u32) -> Result<Encoded, DesktopError> {
    let (w, h) = img.dimensions();
    let longest = w.max(h);
    let scaled;
    let img = if longest > max_dimension && max_dimension > 0 {
        let f = f64::from(max_dimension) / f64::from(longest);
        let nw = ((f64::from(w) * f).round() as u32).max(1);
        let nh = ((f64::from(h) * f).round() as u32).max(1);
        scaled = image::imageops::resize(img, nw, nh, image::imageops::FilterType::Triangle);
        &scaled
    } else {
        img
    };
    let (width, height) = img.dimensions();
    let failed =
        |e: image::ImageError| DesktopError::Failed(format!("encoding the screenshot: {e}"));
    let mut data = Vec::new();
    let mime = if photo_like(img) {
        let rgb: Vec<u8> = img
            .pixels()
            .flat_map(|p| [p.0[0], p.0[1], p.0[2]])
            .collect();
        JpegEncoder::new_with_quality(&mut data, 80)
            .write_image(&rgb, width, height, image::ExtendedColorType::Rgb8)
            .map_err(failed)?;
        "image/jpeg"
    } else {
        let rgb: Vec<u8> = img
            .pixels()
            .flat_map(|p| [p.0[0], p.0[1], p.0[2]])
            .collect();
        PngEncoder::new_with_quality(&mut data, CompressionType::Fast, FilterType::Paeth)
            .write_image(&rgb, width, height, image::ExtendedColorType::Rgb8)
            .map_err(failed)?;
        "image/png"
    };
    Ok(Encoded {
        data,
        mime,
        width,
        height,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interface(w: u32, h: u32) -> RgbaImage {
        RgbaImage::from_fn(w, h, |x, y| {
            if (x / 40 + y / 30) % 3 == 0 {
                image::Rgba([240, 240, 240, 255])
            } else {
                image::Rgba([30, 90, 200, 255])
            }
        })
    }

    fn photo(w: u32, h: u32) -> RgbaImage {
        // A deterministic noise field: every pixel a different colour.
        RgbaImage::from_fn(w, h, |x, y| {
            let v = x
                .wrapping_mul(2_654_435_761)
                .wrapping_add(y.wrapping_mul(40_503))
                .rotate_left(7);
            image::Rgba([(v >> 8) as u8, (v >> 16) as u8, (v >> 24) as u8, 255])
        })
    }

    #[test]
    fn interfaces_are_png_and_photos_jpeg() {
        let ui = encode(&interface(640, 400), 1568).unwrap();
        assert_eq!((ui.mime, ui.width, ui.height), ("image/png", 640, 400));
        assert_eq!(
            image::guess_format(&ui.data).unwrap(),
            image::ImageFormat::Png
        );
        let ph = encode(&photo(640, 400), 1568).unwrap();
        assert_eq!(ph.mime, "image/jpeg");
        assert_eq!(
            image::guess_format(&ph.data).unwrap(),
            image::ImageFormat::Jpeg
        );
    }

    #[test]
    fn a_large_screen_is_scaled_down_to_the_limit_keeping_its_shape() {
        let big = encode(&interface(3200, 1800), 1568).unwrap();
        assert_eq!((big.width, big.height), (1568, 882));
        let decoded = image::load_from_memory(&big.data).unwrap();
        assert_eq!((decoded.width(), decoded.height()), (1568, 882));
    }
}
