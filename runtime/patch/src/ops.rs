//! What a patch is once parsed, whichever form it came in: file operations, their chunks and
//! lines, and why a text is not a patch.

/// A parsed patch: its file operations in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    /// The operations, in patch order.
    pub ops: Vec<FileOp>,
}

/// One file operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOp {
    /// `*** Add File:` creates (or overwrites) a file with these contents.
    Add {
        /// The path as written.
        path: String,
        /// The new contents (every line ends with `\n`).
        contents: String,
        /// 1-based line of the header in the patch.
        line: usize,
    },
    /// `*** Delete File:` removes a file.
    Delete {
        /// The path as written.
        path: String,
        /// 1-based line of the header in the patch.
        line: usize,
    },
    /// `*** Update File:` changes lines, and optionally moves the file.
    Update {
        /// The path as written.
        path: String,
        /// `*** Move to:` destination.
        move_to: Option<String>,
        /// The chunks, in file order.
        chunks: Vec<Chunk>,
        /// 1-based line of the header in the patch.
        line: usize,
    },
}

impl FileOp {
    /// The path the operation names first.
    pub fn path(&self) -> &str {
        match self {
            FileOp::Add { path, .. }
            | FileOp::Delete { path, .. }
            | FileOp::Update { path, .. } => path,
        }
    }
}

/// One line of a chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChunkLine {
    /// ` text`: must be there, stays.
    Context(String),
    /// `-text`: must be there, goes.
    Delete(String),
    /// `+text`: is added.
    Add(String),
}

/// One `@@` chunk of an update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// The text after `@@ `: a line to find before the chunk's lines.
    pub anchor: Option<String>,
    /// The chunk's lines.
    pub lines: Vec<ChunkLine>,
    /// `*** End of File` closed the chunk: its lines must be the file's last.
    pub end_of_file: bool,
    /// 1-based line of the chunk's first line in the patch.
    pub line: usize,
}

impl Chunk {
    /// The lines that must already be in the file (context and deletions), in order.
    pub fn old_lines(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|l| match l {
                ChunkLine::Context(s) | ChunkLine::Delete(s) => Some(s.as_str()),
                ChunkLine::Add(_) => None,
            })
            .collect()
    }

    /// Lines added and removed.
    pub fn counts(&self) -> (usize, usize) {
        let added = self
            .lines
            .iter()
            .filter(|l| matches!(l, ChunkLine::Add(_)))
            .count();
        let removed = self
            .lines
            .iter()
            .filter(|l| matches!(l, ChunkLine::Delete(_)))
            .count();
        (added, removed)
    }
}

/// Why a patch does not parse, with the 1-based line (0 when it concerns the whole patch).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", if *line > 0 { format!("line {line}: ") } else { String::new() })]
pub struct ParseError {
    /// 1-based line in the patch text, or 0.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

pub(crate) fn err(line: usize, message: impl Into<String>) -> ParseError {
    ParseError {
        line,
        message: message.into(),
    }
}
