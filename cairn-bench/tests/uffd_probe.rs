//! `cairn-bench uffd-probe` end to end: every placement, including those whose handler
//! or reader runs in the helper process, handles every fault the writer makes (a store
//! that was never woken would hang the run; one handled twice or lost would change the
//! count), and the helper's reader really reads the writer's memory.

use std::process::Command;

/// The probe's per-run lines: (placement, faults handled, reader MB/s).
fn runs(out: &str) -> Vec<(String, u64, f64)> {
    out.lines()
        .filter(|l| l.starts_with("1 "))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[1].to_string(),
                f[2].parse().expect("faults"),
                f[9].parse().expect("reader MB/s"),
            )
        })
        .collect()
}

#[test]
fn every_placement_handles_every_fault() {
    let out = Command::new(env!("CARGO_BIN_EXE_cairn-bench"))
        .args([
            "uffd-probe",
            "--mib",
            "16",
            "--rate",
            "2000",
            "--secs",
            "0.25",
            "--rounds",
            "1",
            "--placements",
            "a,b,c,c0",
        ])
        .output()
        .expect("run cairn-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(!stderr.contains("uffd-probe"), "{stderr}");
    let r = runs(&stdout);
    let names: Vec<&str> = r.iter().map(|(p, _, _)| p.as_str()).collect();
    assert_eq!(names, ["a", "b", "c", "c0"], "{stdout}");
    for (p, faults, read) in &r {
        // 2000/s for 0.25 s: 500 stores, each into a fresh protected page.
        assert_eq!(*faults, 500, "{p}: {stdout}");
        assert!(*read > 0.0, "{p}: the reader read nothing\n{stdout}");
    }
}
