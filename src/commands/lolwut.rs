//! LOLWUT (Redis's `lolwut.c`, `lolwut5.c`, `lolwut6.c`): `LOLWUT [VERSION v] [args]`.
//! Version 5 draws Georg Nees's "Schotter" in Braille characters, version 6 a skyline in
//! ANSI colours, anything else (the default: cairn speaks 7.0.15) prints the version.
//! The drawings follow Redis's geometry and integer/`float` arithmetic, so the parts
//! that involve no randomness (Schotter's first two rows, a one-row skyline) are the
//! same bytes as redis-server's; the random parts come from cairn's generator.

use super::{CmdError, CmdResult, CommandSpec, Ctx, FAST, READONLY};
use crate::util::Rng;

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("lolwut", -1, READONLY | FAST, "server", lolwut).doc("Display some computer art and the Redis version", "5.0.0"),
];

const VERSION: &str = super::connection::COMPAT_REDIS_VERSION;

/// A Schotter canvas is `2 * cols` by about `2 * cols / per_row * per_col` pixels, which
/// the argument limits alone let reach 2000 x 399,204 (Redis allocates it all); beyond
/// this many pixels cairn refuses instead.
const MAX_CANVAS_PIXELS: u64 = 16 << 20;

struct Canvas {
    width: i32,
    height: i32,
    pixels: Vec<u8>,
}

impl Canvas {
    fn new(width: i32, height: i32, bg: u8) -> Canvas {
        Canvas {
            width,
            height,
            pixels: vec![bg; (width.max(0) as usize) * (height.max(0) as usize)],
        }
    }
    fn set(&mut self, x: i32, y: i32, c: u8) {
        if x < 0 || x >= self.width || y < 0 || y >= self.height {
            return;
        }
        self.pixels[(x + y * self.width) as usize] = c;
    }
    fn get(&self, x: i32, y: i32) -> u8 {
        if x < 0 || x >= self.width || y < 0 || y >= self.height {
            return 0;
        }
        self.pixels[(x + y * self.width) as usize]
    }
    /// Bresenham, as Redis's lwDrawLine.
    fn line(&mut self, mut x1: i32, mut y1: i32, x2: i32, y2: i32, c: u8) {
        let dx = (x2 - x1).abs();
        let dy = (y2 - y1).abs();
        let sx = if x1 < x2 { 1 } else { -1 };
        let sy = if y1 < y2 { 1 } else { -1 };
        let mut err = dx - dy;
        loop {
            self.set(x1, y1, c);
            if x1 == x2 && y1 == y2 {
                break;
            }
            let e2 = err * 2;
            if e2 > -dy {
                err -= dy;
                x1 += sx;
            }
            if e2 < dx {
                err += dx;
                y1 += sy;
            }
        }
    }
    /// A square of side `size` centred on (x, y), rotated by `angle` (C `float`s).
    fn square(&mut self, x: i32, y: i32, size: f32, angle: f32, c: u8) {
        // Redis divides by this truncated root of two, not by SQRT_2: the squares' sizes
        // depend on the exact value.
        #[allow(clippy::approx_constant)]
        let size = ((size as f64 / 1.4142135623) as f32).round();
        let mut k = (std::f64::consts::FRAC_PI_4 + angle as f64) as f32;
        let mut px = [0i32; 4];
        let mut py = [0i32; 4];
        for j in 0..4 {
            px[j] = ((k as f64).sin() * size as f64 + x as f64).round() as i32;
            py[j] = ((k as f64).cos() * size as f64 + y as f64).round() as i32;
            k = (k as f64 + std::f64::consts::FRAC_PI_2) as f32;
        }
        for j in 0..4 {
            self.line(px[j], py[j], px[(j + 1) % 4], py[(j + 1) % 4], c);
        }
    }
}

/// C's `rand()`: 0..=RAND_MAX (2^31 - 1).
fn rand(rng: &mut Rng) -> i32 {
    (rng.next_u64() >> 33) as i32
}

fn lolwut(ctx: &mut Ctx) -> CmdResult {
    let mut version = VERSION.to_string();
    let mut first = 1;
    if ctx.args.len() >= 3 && ctx.args.is(1, "version") {
        let v = ctx.args.i64(2)?;
        // `%u` of the value cast to an unsigned int.
        version = format!("{}.0.0", v as u32);
        first = 3;
    }
    let args: Vec<&[u8]> = (first..ctx.args.len()).map(|i| ctx.args.get(i)).collect();
    let v = version.as_bytes();
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    let text = if (at(0) == b'5' && at(1) == b'.' && at(2) != b'9')
        || (at(0) == b'4' && at(1) == b'.' && at(2) == b'9')
    {
        schotter(&args)?
    } else if (at(0) == b'6' && at(1) == b'.' && at(2) != b'9')
        || (at(0) == b'5' && at(1) == b'.' && at(2) == b'9')
    {
        skyline(&args)?
    } else {
        format!("Redis ver. {VERSION}\n").into_bytes()
    };
    ctx.out.verbatim(&text);
    Ok(())
}

/// The version-specific numeric arguments (Redis's getLongFromObjectOrReply).
fn arg_or(args: &[&[u8]], i: usize, default: i64) -> Result<i64, CmdError> {
    match args.get(i) {
        Some(a) => crate::util::parse_i64(a).ok_or(CmdError::NotInteger),
        None => Ok(default),
    }
}

fn schotter(args: &[&[u8]]) -> Result<Vec<u8>, CmdError> {
    let cols = arg_or(args, 0, 66)?.clamp(1, 1000) as i32;
    let per_row = arg_or(args, 1, 8)?.clamp(1, 200) as i32;
    let per_col = arg_or(args, 2, 12)?.clamp(1, 200) as i32;
    let width = cols * 2;
    let padding = if width > 4 { 2 } else { 0 };
    let side = (width - padding * 2) as f32 / per_row as f32;
    let height = (side * per_col as f32 + (padding * 2) as f32) as i32;
    if width as u64 * height.max(0) as u64 > MAX_CANVAS_PIXELS {
        return Err(CmdError::err("LOLWUT canvas too large"));
    }
    let mut canvas = Canvas::new(width, height, 0);
    let mut rng = Rng::from_time();
    let frand = |rng: &mut Rng| rand(rng) as f32 / 2147483647.0f32;
    for y in 0..per_col {
        for x in 0..per_row {
            let mut sx = (x as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut sy = (y as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut angle = 0.0f32;
            if y > 1 {
                let mut r1 = frand(&mut rng) / per_col as f32 * y as f32;
                let mut r2 = frand(&mut rng) / per_col as f32 * y as f32;
                let mut r3 = frand(&mut rng) / per_col as f32 * y as f32;
                if rand(&mut rng) % 2 != 0 {
                    r1 = -r1;
                }
                if rand(&mut rng) % 2 != 0 {
                    r2 = -r2;
                }
                if rand(&mut rng) % 2 != 0 {
                    r3 = -r3;
                }
                angle = r1;
                sx = (sx as f32 + r2 * side / 3.0) as i32;
                sy = (sy as f32 + r3 * side / 3.0) as i32;
            }
            canvas.square(sx, sy, side, angle, 1);
        }
    }
    // Braille: each character is a 2 x 4 block of pixels.
    let mut out = Vec::new();
    let mut y = 0;
    while y < canvas.height {
        let mut x = 0;
        while x < canvas.width {
            let bits = [
                (x, y),
                (x, y + 1),
                (x, y + 2),
                (x + 1, y),
                (x + 1, y + 1),
                (x + 1, y + 2),
                (x, y + 3),
                (x + 1, y + 3),
            ];
            let mut byte = 0u32;
            for (i, (px, py)) in bits.iter().enumerate() {
                if canvas.get(*px, *py) != 0 {
                    byte |= 1 << i;
                }
            }
            let code = 0x2800 + byte;
            out.push(0xE0 | (code >> 12) as u8);
            out.push(0x80 | ((code >> 6) & 0x3F) as u8);
            out.push(0x80 | (code & 0x3F) as u8);
            x += 2;
        }
        if y != canvas.height - 1 {
            out.push(b'\n');
        }
        y += 4;
    }
    out.extend_from_slice(
        format!("\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. {VERSION}\n")
            .as_bytes(),
    );
    Ok(out)
}

struct Skyscraper {
    xoff: i32,
    width: i32,
    height: i32,
    windows: bool,
    color: u8,
}

fn skyscraper(canvas: &mut Canvas, s: &Skyscraper, rng: &mut Rng) {
    let starty = canvas.height - 1;
    let endy = starty - s.height + 1;
    let mut y = starty;
    while y >= endy {
        for x in s.xoff..s.xoff + s.width {
            if y == endy && (x <= s.xoff + 1 || x >= s.xoff + s.width - 2) {
                continue;
            }
            let mut color = s.color;
            if s.windows
                && x > s.xoff + 1
                && x < s.xoff + s.width - 2
                && y > endy + 1
                && y < starty - 1
            {
                let relx = x - (s.xoff + 1);
                let rely = y - (endy + 1);
                if (relx / 2) % 2 != 0 && rely % 2 != 0 {
                    loop {
                        color = 1 + (rand(rng) % 2) as u8;
                        if color != s.color {
                            break;
                        }
                    }
                    if relx % 2 != 0 {
                        color = canvas.get(x - 1, y);
                    }
                }
            }
            canvas.set(x, y, color);
        }
        y -= 1;
    }
}

fn skyline(args: &[&[u8]]) -> Result<Vec<u8>, CmdError> {
    let cols = arg_or(args, 0, 80)?.clamp(1, 1000) as i32;
    let rows = arg_or(args, 1, 20)?.clamp(1, 1000) as i32;
    let mut canvas = Canvas::new(cols, rows, 3);
    let mut rng = Rng::from_time();
    let h = canvas.height;
    for color in [2u8, 1] {
        let mut offset = -10;
        while offset < canvas.width {
            offset += rand(&mut rng) % 8;
            let width = 10 + rand(&mut rng) % 9;
            let height = if color == 2 {
                h / 2 + (rand(&mut rng) % h) / 2
            } else {
                h / 2 + (rand(&mut rng) % h) / 3
            };
            let s = Skyscraper {
                xoff: offset,
                width,
                height,
                windows: false,
                color,
            };
            skyscraper(&mut canvas, &s, &mut rng);
            offset += if color == 2 { width / 2 } else { width + 1 };
        }
    }
    let mut offset = -10;
    while offset < canvas.width {
        offset += rand(&mut rng) % 8;
        let mut width = 5 + rand(&mut rng) % 14;
        if width % 4 != 0 {
            width += width % 3;
        }
        let height = h / 3 + (rand(&mut rng) % h) / 2;
        let s = Skyscraper {
            xoff: offset,
            width,
            height,
            windows: true,
            color: 0,
        };
        skyscraper(&mut canvas, &s, &mut rng);
        offset += width + 5;
    }
    let mut out = Vec::new();
    for y in 0..canvas.height {
        for x in 0..canvas.width {
            let ce: &[u8] = match canvas.get(x, y) {
                1 => b"0;90;100m",
                2 => b"0;37;47m",
                3 => b"0;97;107m",
                _ => b"0;30;40m",
            };
            out.extend_from_slice(b"\x1b[");
            out.extend_from_slice(ce);
            out.extend_from_slice(b" \x1b[0m");
        }
        if y != canvas.height - 1 {
            out.push(b'\n');
        }
    }
    out.extend_from_slice(
        format!(
            "\nDedicated to the 8 bit game developers of past and present.\nOriginal 8 bit image from Plaguemon by hikikomori. Redis ver. {VERSION}\n"
        )
        .as_bytes(),
    );
    Ok(out)
}
