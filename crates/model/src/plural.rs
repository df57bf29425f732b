//! Counts in messages as an operator reads them: "1 thread", "2 threads", rather than
//! "1 thread(s)" or "needs 1 CPUs". Every stage writes counts into log lines, errors
//! and reports, so the rule lives below them all.

use std::fmt;

/// `n` followed by `noun`, in the plural unless `n` is one. Nouns ending in "s" take
/// "es" ("process", "processes"); the nouns numasched counts need no other rule.
pub fn count(n: usize, noun: &str) -> Count<'_> {
    Count { n, noun }
}

/// What [`count`] returns: formatted where it is written, so it costs no allocation.
#[derive(Debug, Clone, Copy)]
pub struct Count<'a> {
    n: usize,
    noun: &'a str,
}

impl fmt::Display for Count<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ending = match (self.n, self.noun.ends_with('s')) {
            (1, _) => "",
            (_, true) => "es",
            (_, false) => "s",
        };
        write!(f, "{} {}{ending}", self.n, self.noun)
    }
}

#[cfg(test)]
mod tests {
    use super::count;

    #[test]
    fn one_is_singular_every_other_count_plural() {
        assert_eq!(count(1, "CPU").to_string(), "1 CPU");
        assert_eq!(count(0, "CPU").to_string(), "0 CPUs");
        assert_eq!(count(2, "thread").to_string(), "2 threads");
        assert_eq!(count(1, "process").to_string(), "1 process");
        assert_eq!(count(3, "process").to_string(), "3 processes");
    }
}
