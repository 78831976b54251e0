use super::*;

/// The shipped 910B profile's text with `edit` applied to its JSON value.
fn edited(edit: impl FnOnce(&mut serde_json::Value)) -> String {
    let mut v: serde_json::Value = serde_json::from_str(ATLAS_800T_A2_JSON).unwrap();
    edit(&mut v);
    v.to_string()
}

fn figure_error(text: &str) -> (String, String) {
    match Profile::from_json(text) {
        Err(ProfileError::Figure { field, reason, .. }) => (field, reason),
        other => panic!("expected a figure error, got {other:?}"),
    }
}

fn syntax_error(text: &str) -> (String, String) {
    match Profile::from_json(text) {
        Err(ProfileError::Syntax { field, message, .. }) => (field, message),
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

#[test]
fn the_shipped_profiles_load_and_every_figure_has_a_source() {
    for profile in [Profile::atlas_800t_a2(), Profile::generic_gpu()] {
        assert_eq!(profile.device.name, profile.name);
        let figures = profile.figures();
        // 22 device figures, and 8 node figures for a node profile.
        let want = 22 + if profile.node.is_some() { 8 } else { 0 };
        assert_eq!(figures.len(), want, "{}", profile.name);
        for f in &figures {
            assert!(
                f.source.len() > 20,
                "{}: {} has no real source",
                profile.name,
                f.field
            );
            assert!(!f.value.is_empty(), "{}: {}", profile.name, f.field);
        }
    }
    let atlas = Profile::atlas_800t_a2();
    assert_eq!(atlas.name, "atlas-800t-a2");
    assert_eq!(Profile::generic_gpu().name, "generic-gpu");
    assert!(Profile::generic_gpu().node.is_none());
    let node = atlas.node.unwrap();
    assert_eq!(node.devices_per_server, 8);
    assert_eq!(node.intra_server, LinkSpec::hccs_910b());
    assert_eq!(node.network, LinkSpec::roce_200ge());
    assert_eq!(DeviceProfile::ascend_910b(), atlas.device);
    assert_eq!(DeviceProfile::default(), atlas.device);
}

#[test]
fn units_become_base_units() {
    let p = &Profile::atlas_800t_a2().device;
    assert_eq!(p.cube_flops_per_s, 313_182_000_000_000);
    assert_eq!(p.cube_bf16_flops_per_s, 304_277_000_000_000);
    assert_eq!(p.cube_f32_flops_per_s, 85_000_000_000_000);
    assert_eq!(p.vector_tile_bytes, 192 << 10);
    assert_eq!(p.hbm_bytes, 64 << 30);
    // 60.97 GiB, rounded to the byte.
    assert_eq!(p.memory_bytes, (60.97 * (1u64 << 30) as f64).round() as u64);
    assert_eq!(p.h2d_bytes_per_s, 24_926_000_000);
    assert_eq!(p.graph_node_ns, 500);
    assert_eq!(p.cube_efficiency.len(), 3);
    assert_eq!(p.cube_efficiency[0].ideal_ns, 6_857);
    assert_eq!(
        Profile::atlas_800t_a2().figures()[0].field,
        "device.copy_engines",
        "sorted by path"
    );
}

#[test]
fn a_profile_round_trips_through_its_json() {
    for profile in [Profile::atlas_800t_a2(), Profile::generic_gpu()] {
        let again = Profile::from_json(&profile.to_json()).unwrap();
        assert_eq!(&again, profile);
        let doc = Profile::from_document(profile.document.clone()).unwrap();
        assert_eq!(&doc, profile);
    }
}

#[test]
fn a_profile_loads_from_a_file_and_a_missing_file_is_named() {
    let dir = std::env::temp_dir().join(format!("braid-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mine.json");
    let text = edited(|v| v["name"] = "mine".into());
    std::fs::write(&path, text).unwrap();
    let mine = Profile::from_file(&path).unwrap();
    assert_eq!(mine.device.name, "mine");
    let missing = dir.join("absent.json");
    let err = Profile::from_file(&missing).unwrap_err();
    assert!(matches!(err, ProfileError::Read { .. }), "{err:?}");
    assert!(err.to_string().contains("absent.json"), "{err}");
    // A bad file names itself and the field.
    std::fs::write(
        &path,
        edited(|v| v["device"]["cube_units"]["value"] = 2.5.into()),
    )
    .unwrap();
    let err = Profile::from_file(&path).unwrap_err().to_string();
    assert!(
        err.contains("mine.json") && err.contains("device.cube_units"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn unknown_and_missing_fields_are_refused_with_their_path() {
    let (field, message) = syntax_error(&edited(|v| v["device"]["cube_f16"]["typo"] = 1.into()));
    assert!(field.starts_with("device.cube_f16"), "{field}");
    assert!(message.contains("typo"), "{message}");
    let (field, message) = syntax_error(&edited(|v| v["device"]["warp_size"] = 32.into()));
    assert!(field.starts_with("device"), "{field}");
    assert!(message.contains("warp_size"), "{message}");
    let (field, message) = syntax_error(&edited(|v| {
        v["device"].as_object_mut().unwrap().remove("cube_f32");
    }));
    assert_eq!(field, "device");
    assert!(message.contains("cube_f32"), "{message}");
    let (field, message) = syntax_error(&edited(|v| {
        v["node"]["link_bandwidth"]["kind"] = "guess".into()
    }));
    assert_eq!(field, "node.link_bandwidth.kind");
    assert!(message.contains("guess"), "{message}");
    let (_, message) = syntax_error("{ not json");
    assert!(message.contains("line 1"), "{message}");
}

/// A change to a profile's JSON.
type Edit = Box<dyn Fn(&mut serde_json::Value)>;

#[test]
fn figures_that_do_not_fit_their_field_are_refused_by_name() {
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "device.cube_f16",
            Box::new(|v| v["device"]["cube_f16"]["unit"] = "GB/s".into()),
            "GB/s",
        ),
        (
            "device.cube_f32",
            Box::new(|v| v["device"]["cube_f32"]["value"] = (-1.0).into()),
            "non-negative",
        ),
        (
            "device.h2d_bandwidth",
            Box::new(|v| v["device"]["h2d_bandwidth"]["value"] = 0.into()),
            "positive",
        ),
        (
            "device.cube_units",
            Box::new(|v| v["device"]["cube_units"]["value"] = 0.into()),
            "whole count",
        ),
        (
            "device.copy_engines",
            Box::new(|v| v["device"]["copy_engines"]["unit"] = "B".into()),
            "no unit",
        ),
        (
            "device.cube_efficiency.points[1]",
            Box::new(|v| v["device"]["cube_efficiency"]["points"][1][0] = 1.0.into()),
            "increase",
        ),
        (
            "device.cube_efficiency.points[0]",
            Box::new(|v| v["device"]["cube_efficiency"]["points"][0][1] = 1.5.into()),
            "(0, 1]",
        ),
        (
            "device.cube_efficiency",
            Box::new(|v| v["device"]["cube_efficiency"]["unit"] = "GB".into()),
            "GB",
        ),
        (
            "device.memory_total",
            Box::new(|v| v["device"]["memory_total"]["value"] = 65.into()),
            "hbm_capacity",
        ),
        (
            "device.hbm_effective_bandwidth",
            Box::new(|v| v["device"]["hbm_effective_bandwidth"]["value"] = 2.into()),
            "nominal",
        ),
        (
            "node.devices_per_server",
            Box::new(|v| v["node"]["devices_per_server"]["value"] = 7.5.into()),
            "whole count",
        ),
        (
            "node.link_latency",
            Box::new(|v| v["node"]["link_latency"]["unit"] = "days".into()),
            "days",
        ),
    ];
    for (want_field, edit, needle) in cases {
        let (field, reason) = figure_error(&edited(edit));
        assert_eq!(field, want_field);
        assert!(reason.contains(needle), "{field}: {reason}");
    }
}

#[test]
fn a_profile_without_a_node_or_a_curve_is_valid() {
    let text = edited(|v| {
        v.as_object_mut().unwrap().remove("node");
        v["device"]["cube_efficiency"]["points"] = serde_json::json!([]);
    });
    let p = Profile::from_json(&text).unwrap();
    assert!(p.node.is_none() && p.server(4).is_none());
    assert_eq!(p.device.cube_efficiency_at(1), 1.0);
    let atlas = Profile::atlas_800t_a2().server(20).unwrap();
    assert_eq!(atlas.server_size, 8, "a server holds 8");
}

#[test]
fn the_efficiency_curve_interpolates_in_log_time_and_holds_at_its_ends() {
    let mut p = DeviceProfile::ascend_910b();
    p.cube_efficiency = vec![
        EfficiencyPoint {
            ideal_ns: 100,
            efficiency: 0.2,
        },
        EfficiencyPoint {
            ideal_ns: 10_000,
            efficiency: 0.6,
        },
        EfficiencyPoint {
            ideal_ns: 1_000_000,
            efficiency: 1.0,
        },
    ];
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert_eq!(p.cube_efficiency_at(0), 0.2);
    assert_eq!(p.cube_efficiency_at(100), 0.2);
    assert!(close(p.cube_efficiency_at(1_000), 0.4));
    assert!(close(p.cube_efficiency_at(10_000), 0.6));
    assert!(close(p.cube_efficiency_at(100_000), 0.8));
    assert_eq!(p.cube_efficiency_at(u64::MAX), 1.0);
    // A hand-built curve out of range is clamped, never divides by zero.
    p.cube_efficiency = vec![EfficiencyPoint {
        ideal_ns: 1,
        efficiency: 0.0,
    }];
    assert_eq!(p.cube_efficiency_at(5), MIN_EFFICIENCY);
    p.cube_efficiency[0].efficiency = f64::NAN;
    assert_eq!(p.cube_efficiency_at(5), 1.0);
}

#[test]
fn profiles_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Profile>();
    check::<ProfileError>();
    // The shipped profile is one value shared by every thread.
    let handles: Vec<_> = (0..4)
        .map(|_| std::thread::spawn(|| Profile::atlas_800t_a2() as *const Profile as usize))
        .collect();
    let addrs: Vec<usize> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(addrs.windows(2).all(|w| w[0] == w[1]));
}
