//! Images for the model: PNG, JPEG, GIF and WebP only, checked before decoding (dimensions
//! and sample format read from the header, so a decompression bomb is refused before it is
//! expanded), decoded under allocation limits counted in bytes (a 16-bit RGBA pixel is 8
//! bytes, not 1), at most [`memory::DECODE_SLOTS`] at once and within the process's memory
//! ceiling, and downscaled to a bounded size by area sampling (no full-size float buffer).

use std::io::{Cursor, Read as _};

use base64::Engine as _;
use image::{ImageDecoder as _, ImageFormat, ImageReader, Limits};
use tool_api::{Authorized, ErrorCode, ToolError, memory};

use super::path_policy::Resolved;

/// Bounds for one image.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Largest file accepted.
    pub max_file_bytes: u64,
    /// Largest decoded size accepted, in pixels.
    pub max_pixels: u64,
    /// Largest decoded size accepted, in bytes (pixels times bytes per pixel).
    pub max_decode_bytes: u64,
    /// Longest side of what is returned.
    pub max_dimension: u32,
}

/// An image ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    /// Base64 of the bytes sent.
    pub data: String,
    /// Their MIME type.
    pub mime: &'static str,
    /// Size sent.
    pub width: u32,
    /// Size sent.
    pub height: u32,
    /// Size of the file's image.
    pub original_width: u32,
    /// Size of the file's image.
    pub original_height: u32,
    /// `PNG`, `JPEG`, `GIF` or `WebP`.
    pub format: &'static str,
}

impl Prepared {
    /// One line for the model beside the image.
    pub fn describe(&self, path: &str) -> String {
        if (self.width, self.height) == (self.original_width, self.original_height) {
            format!(
                "{path}: {} image, {}×{} pixels",
                self.format, self.width, self.height
            )
        } else {
            format!(
                "{path}: {} image, {}×{} pixels, shown downscaled to {}×{}",
                self.format, self.original_width, self.original_height, self.width, self.height
            )
        }
    }
}

fn format_name(f: ImageFormat) -> Option<(&'static str, &'static str)> {
    match f {
        ImageFormat::Png => Some(("PNG", "image/png")),
        ImageFormat::Jpeg => Some(("JPEG", "image/jpeg")),
        ImageFormat::Gif => Some(("GIF", "image/gif")),
        ImageFormat::WebP => Some(("WebP", "image/webp")),
        _ => None,
    }
}

fn invalid(path: &str, what: impl std::fmt::Display) -> ToolError {
    ToolError::invalid_input(format!("{path}: {what}"))
}

/// Whether `path` is named like an image (its content decides what it is; this only says
/// whether reading it may mean decoding).
pub fn looks_like_image(path: &str) -> bool {
    let ext = path.rsplit_once('.').map_or("", |(_, e)| e);
    [
        "png", "jpg", "jpeg", "gif", "webp", "bmp", "ico", "tif", "tiff", "avif", "heic",
    ]
    .iter()
    .any(|i| ext.eq_ignore_ascii_case(i))
}

/// Reads, checks, decodes and bounds the image at `file`.
pub fn prepare(file: &Authorized<Resolved>, bounds: Bounds) -> Result<Prepared, ToolError> {
    let path = file.given.as_str();
    let (f, _, size) =
        super::fs::open(file).map_err(|e| ToolError::os(format!("{path}: cannot open"), &e))?;
    if size > bounds.max_file_bytes {
        return Err(ToolError::new(
            ErrorCode::OutputLimit,
            format!(
                "{path}: {size} bytes; images up to {} bytes are viewed",
                bounds.max_file_bytes
            ),
        ));
    }
    let _file_held = memory::HEAVY.take(size, memory::WAIT)?;
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    f.take(size + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ToolError::os(format!("{path}: cannot read"), &e))?;
    if bytes.len() as u64 > size {
        // It grew since it was sized: not what was paid for.
        return Err(ToolError::new(
            ErrorCode::OsError,
            format!("{path}: the file changed while it was read; try again"),
        ));
    }

    let reader = ImageReader::new(Cursor::new(&bytes))
        .with_guessed_format()
        .map_err(|e| ToolError::os(format!("{path}: cannot read"), &e))?;
    let Some((format, mime)) = reader.format().and_then(format_name) else {
        return Err(invalid(path, "not a PNG, JPEG, GIF or WebP image"));
    };
    let (w, h) = reader
        .into_dimensions()
        .map_err(|e| invalid(path, format!("unreadable {format} header: {e}")))?;
    let pixels = u64::from(w) * u64::from(h);
    if pixels > bounds.max_pixels {
        return Err(invalid(
            path,
            format!(
                "{w}×{h} is {pixels} pixels, more than the {} gantry decodes (possible decompression bomb)",
                bounds.max_pixels
            ),
        ));
    }

    let reader = ImageReader::new(Cursor::new(&bytes))
        .with_guessed_format()
        .map_err(|e| ToolError::os(format!("{path}: cannot read"), &e))?;
    let mut decoder = reader
        .into_decoder()
        .map_err(|e| invalid(path, format!("unreadable {format} header: {e}")))?;
    let color = decoder.color_type();
    let decode_bytes = decoder.total_bytes();
    if decode_bytes > bounds.max_decode_bytes {
        return Err(invalid(
            path,
            format!(
                "{w}×{h} at {} bytes per pixel decodes to {} MB, more than the {} MB gantry decodes",
                color.bytes_per_pixel(),
                // In the surface's units (1 MB = 2^20 bytes), as the limit is written.
                decode_bytes.div_ceil(1 << 20),
                bounds.max_decode_bytes >> 20
            ),
        ));
    }
    let mut limits = Limits::default();
    limits.max_image_width = Some(w);
    limits.max_image_height = Some(h);
    // The decoder may need a little beyond the pixels themselves (palettes, a row buffer).
    limits.max_alloc = Some(decode_bytes + (4 << 20));
    decoder
        .set_limits(limits)
        .map_err(|e| invalid(path, format!("cannot decode {format}: {e}")))?;
    // Room first: a decode slot, then the pixels, the downscaled copy and its encoding.
    let _slot = memory::DECODES.take(1, memory::WAIT)?;
    let shown_bytes = u64::from(bounds.max_dimension).pow(2) * 8;
    let _pixels_held = memory::HEAVY.take(decode_bytes + 2 * shown_bytes, memory::WAIT)?;
    let decoded = image::DynamicImage::from_decoder(decoder)
        .map_err(|e| invalid(path, format!("cannot decode {format}: {e}")))?;

    let longest = w.max(h);
    if longest <= bounds.max_dimension && format != "GIF" {
        // Small enough and in a format every client takes: send the file's own bytes.
        return Ok(Prepared {
            data: base64::engine::general_purpose::STANDARD.encode(&bytes),
            mime,
            width: w,
            height: h,
            original_width: w,
            original_height: h,
            format,
        });
    }
    let shown = if longest > bounds.max_dimension {
        // Area sampling straight from the decoded pixels: a triangle filter would first
        // build a float copy as tall as the original (hundreds of MB for a large image).
        decoded.thumbnail(bounds.max_dimension, bounds.max_dimension)
    } else {
        decoded
    };
    // Clients take 8-bit images; converting the small copy is cheap.
    let shown = match shown.color() {
        image::ColorType::L8
        | image::ColorType::La8
        | image::ColorType::Rgb8
        | image::ColorType::Rgba8 => shown,
        c if c.has_alpha() => image::DynamicImage::ImageRgba8(shown.to_rgba8()),
        _ => image::DynamicImage::ImageRgb8(shown.to_rgb8()),
    };
    // Photos stay JPEG; everything else (transparency, line art, GIF frames) becomes PNG.
    let (out_format, out_mime) = if format == "JPEG" {
        (ImageFormat::Jpeg, "image/jpeg")
    } else {
        (ImageFormat::Png, "image/png")
    };
    let shown = if out_format == ImageFormat::Jpeg {
        image::DynamicImage::ImageRgb8(shown.to_rgb8())
    } else {
        shown
    };
    let mut out = Vec::new();
    shown
        .write_to(&mut Cursor::new(&mut out), out_format)
        .map_err(|e| {
            ToolError::new(
                ErrorCode::Internal,
                format!("{path}: cannot encode the downscaled image: {e}"),
            )
        })?;
    Ok(Prepared {
        data: base64::engine::general_purpose::STANDARD.encode(&out),
        mime: out_mime,
        width: shown.width(),
        height: shown.height(),
        original_width: w,
        original_height: h,
        format,
    })
}
