//! Every example in `scenarios/` parses, and its instance type and zone names exist in the catalog it builds.

use std::collections::BTreeSet;

use karpenter_tui::engine::catalog::Catalog;
use karpenter_tui::engine::catalog::aws::aws_catalog;
use karpenter_tui::engine::catalog::inline::{add_inline_types, inline_catalog};
use karpenter_tui::engine::catalog::kwok::kwok_catalog;
use karpenter_tui::sim::scenario::{CatalogSource, Scenario, parse_scenario};

fn catalog_for(s: &Scenario) -> Catalog {
    match s.catalog.source {
        CatalogSource::Aws => {
            let mut c = aws_catalog(&s.region, s.catalog.zones.as_deref(), None, s.seed).expect("aws catalog");
            add_inline_types(&mut c, &s.catalog.instance_types).expect("inline types");
            c
        }
        CatalogSource::Kwok => {
            let mut c = kwok_catalog(&s.region);
            add_inline_types(&mut c, &s.catalog.instance_types).expect("inline types");
            c
        }
        CatalogSource::Inline => inline_catalog(&s.region, &s.catalog.instance_types).expect("inline catalog"),
    }
}

fn zones_of(c: &Catalog) -> Vec<String> {
    let set: BTreeSet<String> =
        c.instance_types.iter().flat_map(|it| it.offerings.iter().map(|o| o.zone.clone())).collect();
    set.into_iter().collect()
}

#[test]
fn every_example_scenario_parses_and_references_the_catalog() {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios")).expect("scenarios/") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read");
        let file = path.display().to_string();
        let s = parse_scenario(&text, &file).unwrap_or_else(|e| panic!("{e}"));
        let catalog = catalog_for(&s);
        let zones = zones_of(&catalog);
        s.check_references(&|name| catalog.get(name).is_some(), &zones).unwrap_or_else(|e| panic!("{e}"));
        names.push(path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string());
    }
    for required in
        ["walkthrough.yaml", "prod-dev.yaml", "spread.yaml", "daemonsets.yaml", "gpu.yaml", "kwok-inline.yaml"]
    {
        assert!(names.iter().any(|n| n == required), "missing scenarios/{required}");
    }
}

#[test]
fn walkthrough_matches_the_issue() {
    use karpenter_tui::sim::scenario::Action;
    let text = include_str!("../scenarios/walkthrough.yaml");
    let s = parse_scenario(text, "walkthrough.yaml").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.catalog.source, CatalogSource::Aws);
    assert_eq!(s.region, "us-east-1");
    assert_eq!(s.objects.deployments.len(), 1);
    let replicas: Vec<i32> = s
        .events
        .iter()
        .filter_map(|e| match &e.action {
            Action::Scale(sc) => Some(sc.replicas),
            _ => None,
        })
        .collect();
    assert_eq!(replicas, [5, 20, 10, 5, 0]);
}
