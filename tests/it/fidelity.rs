//! The model against published measurements. docs/fidelity.md holds the
//! table the model produces, row for row, and a reason for every row not reproduced: a
//! change to the model that moves any figure, or makes a row pass or fail, must update
//! the document (`cargo run --release --example fidelity`), so what it claims is what
//! the model does.

use std::path::Path;

use numasched::model::profile::ProfileSet;
use numasched::sim::fidelity::{markdown, rows, rows_with, Row};

const DOC: &str = include_str!("../../docs/fidelity.md");

fn all() -> Vec<Row> {
    rows().expect("presets and built-in profiles exist")
}

#[test]
fn every_published_row_is_checked() {
    let ids: Vec<u32> = all().iter().map(|r| r.id).collect();
    assert_eq!(ids, (1..=19).collect::<Vec<u32>>());
}

#[test]
fn the_document_shows_what_the_model_gives() {
    let table = markdown(&all());
    assert!(
        DOC.contains(&table),
        "docs/fidelity.md is out of date; the model now gives:\n{table}"
    );
}

#[test]
fn every_row_not_reproduced_says_why() {
    for r in all().iter().filter(|r| !r.within) {
        let heading = format!("### Row {} ", r.id);
        let Some(at) = DOC.find(&heading) else {
            panic!(
                "row {} is not reproduced and docs/fidelity.md has no '{heading}…' section",
                r.id
            )
        };
        let body = DOC[at + heading.len()..]
            .split("\n### ")
            .next()
            .unwrap_or("");
        assert!(
            body.split_whitespace().count() >= 20,
            "row {}: the reason in docs/fidelity.md is too short to be one",
            r.id
        );
    }
}

const MEASURED_CURVES: &str = "docs/profiles/measured-curves.toml";

fn measured_curves() -> ProfileSet {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(MEASURED_CURVES);
    ProfileSet::load(&path).expect("the measured curves load")
}

/// The file adds curves to the built-in profiles and changes nothing else of them, so
/// what it shows is what the curves do.
#[test]
fn the_measured_curves_are_the_builtin_profiles_with_curves() {
    let builtin = ProfileSet::builtin();
    let file = measured_curves();
    assert_eq!(file.len(), 6);
    for p in file.iter() {
        let (Some(fills), Some(_)) = (&p.miss_curve, &p.demand_curve) else {
            panic!("{}: both curves", p.name)
        };
        // Relative to the prefetchers-off misses at the reference LLC.
        assert!(
            (fills.ratio(p.reference_llc_bytes as f64) - 1.0).abs() < 1e-9,
            "{}",
            p.name
        );
        let mut bare = p.clone();
        bare.miss_curve = None;
        bare.demand_curve = None;
        assert_eq!(Some(&bare), builtin.get(&p.name), "{}", p.name);
    }
}

#[test]
fn the_document_shows_what_the_measured_curves_give() {
    let set = ProfileSet::builtin().merge(measured_curves());
    let table = markdown(&rows_with(&set).expect("rows"));
    assert!(
        DOC.contains(&table),
        "docs/fidelity.md's table with {MEASURED_CURVES} is out of date; the model now \
         gives:\n{table}"
    );
}
