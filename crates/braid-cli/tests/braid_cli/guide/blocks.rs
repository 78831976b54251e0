//! The fenced blocks of a Markdown file, and the transcript of a `console` block.

use std::path::{Path, PathBuf};

/// One fenced block.
#[derive(Debug)]
pub struct Block {
    /// The file it is in.
    pub file: PathBuf,
    /// The line of its opening fence (1-based).
    pub line: usize,
    /// The first word of the info string (`rust`, `console`, `sh`...).
    pub lang: String,
    /// The other words of the info string (`console torch_npu`: `["torch_npu"]`).
    pub tags: Vec<String>,
    /// Its lines, without the indentation of the opening fence.
    pub body: Vec<String>,
}

impl Block {
    /// `file:line`, for messages.
    pub fn place(&self) -> String {
        format!("{}:{}", self.file.display(), self.line)
    }
}

/// Every fenced block of `path`.
pub fn blocks(path: &Path) -> Vec<Block> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut out = Vec::new();
    let mut open: Option<(Block, usize)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match open.take() {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    let mut words = info.split([' ', ',']);
                    let lang = words.next().unwrap_or_default().to_string();
                    let tags = words.filter(|w| !w.is_empty()).map(String::from).collect();
                    let block = Block {
                        file: path.to_path_buf(),
                        line: i + 1,
                        lang,
                        tags,
                        body: Vec::new(),
                    };
                    open = Some((block, indent));
                }
            }
            Some((mut block, fence_indent)) => {
                if trimmed == "```" {
                    out.push(block);
                } else {
                    let cut = line.len() - line.trim_start().len();
                    block.body.push(line[cut.min(fence_indent)..].to_string());
                    open = Some((block, fence_indent));
                }
            }
        }
    }
    if let Some((block, _)) = open {
        panic!("{}: a block that is never closed", block.place());
    }
    out
}

/// One command of a `console` block and what it prints.
#[derive(Debug)]
pub struct Step {
    /// The line of the command in the file.
    pub line: usize,
    /// The command, continuation lines (`\` at the end) joined.
    pub command: String,
    /// The lines it prints on stdout, with the placeholders of [`crate::matching`].
    pub expected: Vec<String>,
}

/// The steps of a `console` block: `$ ` lines are commands, the lines after one (up to the
/// next command) what it prints.
pub fn transcript(block: &Block) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut continued = false;
    for (i, line) in block.body.iter().enumerate() {
        let line_no = block.line + 1 + i;
        if continued {
            let step = steps.last_mut().expect("a command to continue");
            continued = line.ends_with('\\');
            step.command.push(' ');
            step.command.push_str(line.trim_end_matches('\\').trim());
        } else if let Some(command) = line.strip_prefix("$ ") {
            continued = command.ends_with('\\');
            steps.push(Step {
                line: line_no,
                command: command.trim_end_matches('\\').trim().to_string(),
                expected: Vec::new(),
            });
        } else {
            match steps.last_mut() {
                Some(step) => step.expected.push(line.clone()),
                None => panic!(
                    "{}:{line_no}: a console block starts with a `$ ` command",
                    block.file.display()
                ),
            }
        }
    }
    steps
}

/// Splits a command into words as a shell would for the plain commands the guide prints:
/// whitespace separates, single and double quotes group, `~/` at the start of a word is
/// `home`. Anything a shell would do more (`$(`, pipes, redirections, `;`, `&&`, `$VAR`) is
/// an error: such a command belongs in an `sh` block.
pub fn words(command: &str, home: &Path) -> Result<Vec<String>, String> {
    for special in ["$", "|", ">", "<", ";", "&", "`"] {
        if command.contains(special) {
            return Err(format!(
                "`{special}` needs a shell: the guide test runs plain commands only"
            ));
        }
    }
    let mut out = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in command.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err("an unclosed quote".into());
    }
    if in_word {
        out.push(word);
    }
    Ok(out
        .into_iter()
        .map(|w| match w.strip_prefix("~/") {
            Some(rest) => home.join(rest).display().to_string(),
            None => w,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_quote_and_expand_home() {
        let home = Path::new("/h");
        assert_eq!(
            words("braid plan --conf 'a b' ~/x \"c\"", home).unwrap(),
            ["braid", "plan", "--conf", "a b", "/h/x", "c"]
        );
        assert!(words("a > b", home).is_err());
        assert!(words("eval \"$(braid)\"", home).is_err());
        assert!(words("a 'b", home).is_err());
    }
}
