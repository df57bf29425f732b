//! The model against published measurements. docs/fidelity.md holds the
//! table the model produces, row for row, and a reason for every row not reproduced: a
//! change to the model that moves any figure, or makes a row pass or fail, must update
//! the document (`cargo run --release --example fidelity`), so what it claims is what
//! the model does.

use numasched::sim::fidelity::{markdown, rows, Row};

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
