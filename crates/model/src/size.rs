//! Byte sizes as people type them (`512M`, `2G`, `64MiB`, `1048576`), so `--size` and
//! the config file read like the cache and memory sizes an operator already knows.
//! Suffixes are binary (K = 1024), matching how sysfs and `numactl` report cache and
//! node sizes.

/// Parses a positive byte count: digits, then an optional `K`/`M`/`G`/`T` suffix
/// (case-insensitive, optionally followed by `B` or `iB`). Zero, negatives, fractions
/// and overflow are errors, because a workload of "no memory" measures nothing.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, suffix) = t.split_at(digits_end);
    if num.is_empty() {
        return Err(format!(
            "invalid size {text:?}: expected bytes greater than 0, like 512M, 2G or 1048576"
        ));
    }
    let value: u64 = num
        .parse()
        .map_err(|_| format!("invalid size {text:?}: number too large"))?;
    if suffix.starts_with('.') {
        return Err(format!(
            "invalid size {text:?}: use a whole number with a smaller unit (e.g. 1536M)"
        ));
    }
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => {
            return Err(format!(
                "invalid size {text:?}: unknown suffix {suffix:?} (use K, M, G or T)"
            ))
        }
    };
    let bytes = value
        .checked_mul(1u64 << shift)
        .ok_or_else(|| format!("invalid size {text:?}: too large"))?;
    if bytes == 0 {
        return Err(format!("invalid size {text:?}: must be greater than zero"));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn plain_and_suffixed_sizes() {
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("1T"), Ok(1 << 40));
        assert_eq!(parse_size("100b"), Ok(100));
    }

    #[test]
    fn rejects_zero_negative_fractional_and_garbage() {
        for bad in [
            "", "0", "0G", "-1", "-512M", "1.5G", "abc", "12X", "M", "G2",
        ] {
            assert!(parse_size(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn rejects_overflow() {
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_size("20000000T").is_err());
    }
}
