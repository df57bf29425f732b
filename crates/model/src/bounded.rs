//! Lists in input files read with a cap on their length, checked while they are read:
//! a cap checked after parsing bounds nothing, since the memory is spent by then.

use serde::de::{Deserialize, Deserializer, Error, SeqAccess, Visitor};
use std::marker::PhantomData;

/// A list of at most `max` items; at the first beyond, the error says "more than
/// {max} {what}, the most one file may hold" and `hint`.
pub fn at_most<'de, D, T>(
    d: D,
    max: usize,
    what: &'static str,
    hint: &'static str,
) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct Bounded<T> {
        max: usize,
        what: &'static str,
        hint: &'static str,
        item: PhantomData<T>,
    }
    impl<'de, T: Deserialize<'de>> Visitor<'de> for Bounded<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "a list of at most {} {}", self.max, self.what)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(self.max));
            while let Some(item) = seq.next_element()? {
                if out.len() == self.max {
                    return Err(A::Error::custom(format!(
                        "more than {} {}, the most one file may hold{}",
                        self.max, self.what, self.hint
                    )));
                }
                out.push(item);
            }
            Ok(out)
        }
    }
    d.deserialize_seq(Bounded {
        max,
        what,
        hint,
        item: PhantomData,
    })
}
