//! The configuration string and builder: every setting bounded, validated after the whole
//! string is read (so key order never matters), duplicates refused, values the device cannot
//! honour refused by name when the allocator is made, misspelt keys answered with the nearest
//! valid one, and the history ring grown as it fills instead of all at once.

use crate::common;

use braid_allocator::{AllocError, AllocatorConfig, CachingAllocator, MAX_HISTORY_SIZE};
use common::*;

fn invalid(err: &AllocError) -> (&str, &str, &str) {
    match err {
        AllocError::InvalidConfigValue { key, value, reason } => (key, value, reason),
        other => panic!("expected InvalidConfigValue, got {other:?}"),
    }
}

#[test]
fn an_impossible_history_size_is_a_typed_error_everywhere() {
    for text in [
        "record_history:true,history_size:100000000000",
        "history_size:18446744073709551615,record_history:true",
        "max_entries:18446744073709551616",
    ] {
        let err = AllocatorConfig::parse(text).unwrap_err();
        let (key, _, reason) = invalid(&err);
        assert!(
            key == "history_size" || key == "max_entries",
            "{text}: {err}"
        );
        assert!(
            reason.contains(&MAX_HISTORY_SIZE.to_string()) || reason.contains("integer"),
            "{text}: {err}"
        );
    }
    // The builder's value is refused by name when the allocator is made.
    let dev = device(64 * MIB);
    let err = CachingAllocator::new(
        dev.clone(),
        AllocatorConfig::new()
            .record_history(true)
            .history_size(usize::MAX),
    )
    .unwrap_err();
    assert_eq!(invalid(&err).0, "history_size", "{err}");
    // The run-time setter refuses it too and keeps what was recorded.
    let alloc = CachingAllocator::new(
        dev.clone(),
        AllocatorConfig::new().record_history(true).history_size(8),
    )
    .unwrap();
    drop(alloc.alloc(512, &dev.default_stream()).unwrap());
    let before = alloc.history();
    assert!(!before.is_empty());
    let err = alloc.set_history_size(usize::MAX).unwrap_err();
    assert_eq!(invalid(&err).0, "history_size", "{err}");
    assert_eq!(alloc.history(), before);
    assert_eq!(alloc.config().history_size, 8);
    alloc.set_history_size(MAX_HISTORY_SIZE).unwrap();
    assert_eq!(alloc.history(), before);
    alloc.check_invariants().unwrap();
}

#[test]
fn the_largest_history_is_grown_as_it_fills_not_allocated_up_front() {
    let dev = device(64 * MIB);
    let before = host_bytes();
    let alloc = CachingAllocator::new(
        dev.clone(),
        AllocatorConfig::parse(&format!(
            "record_history:true,history_size:{MAX_HISTORY_SIZE}"
        ))
        .unwrap(),
    )
    .unwrap();
    let made = host_bytes() - before;
    assert!(made < 16 * MIB, "{made} host bytes to make the allocator");
    let stream = dev.default_stream();
    for _ in 0..50_000 {
        drop(alloc.alloc(512, &stream).unwrap());
    }
    let history = alloc.history();
    // A segment alloc, then per pair an alloc, a free requested and a free completed.
    assert_eq!(history.len(), 1 + 3 * 50_000);
    assert!(history.windows(2).all(|w| w[0].time + 1 == w[1].time));
    // Turning it on at run time with the largest size is as cheap.
    let quiet = CachingAllocator::new(dev.clone(), AllocatorConfig::new()).unwrap();
    quiet.set_history_size(MAX_HISTORY_SIZE).unwrap();
    let before = host_bytes();
    quiet.record_history(true);
    assert!(host_bytes() - before < 16 * MIB);
}

#[test]
fn validation_does_not_depend_on_key_order() {
    for (a, b, ok) in [
        ("max_split_size_mb:30", "large_segment_size_mb:40", false),
        ("max_split_size_mb:50", "large_segment_size_mb:40", true),
        ("max_split_size_mb:20", "large_segment_size_mb:10", true),
        ("max_split_size_mb:15", "large_segment_size_mb:10", true),
        ("max_split_size_mb:10", "large_segment_size_mb:10", false),
    ] {
        let forward = AllocatorConfig::parse(&format!("{a},{b}"));
        let backward = AllocatorConfig::parse(&format!("{b},{a}"));
        assert_eq!(forward, backward, "{a},{b}");
        assert_eq!(forward.is_ok(), ok, "{a},{b}: {forward:?}");
        if let Err(err) = forward {
            let (key, value, reason) = invalid(&err);
            assert_eq!((key, value), ("max_split_size_mb", &a[18..]), "{err}");
            assert!(reason.contains("large_segment_size_mb"), "{err}");
        }
    }
}

#[test]
fn a_key_given_twice_is_refused_aliases_included() {
    for (text, key) in [
        (
            "max_split_size_mb:64,max_split_size_mb:128",
            "max_split_size_mb",
        ),
        ("history_size:5,max_entries:6", "history_size"),
        (
            "memory_fraction:0.5,per_process_memory_fraction:0.5",
            "per_process_memory_fraction",
        ),
        (
            "lazy_event_polling:true,multi_stream_lazy_reclaim:false",
            "lazy_event_polling",
        ),
    ] {
        let err = AllocatorConfig::parse(text).unwrap_err();
        match &err {
            AllocError::DuplicateConfigKey { key: k, .. } => assert_eq!(k, key, "{text}"),
            other => panic!("{text}: {other:?}"),
        }
        let msg = err.to_string();
        let (first, second) = text.split_once(',').unwrap();
        assert!(msg.contains(first) && msg.contains(second), "{text}: {msg}");
    }
}

#[test]
fn values_the_device_cannot_honour_are_refused_by_name() {
    let dev = device(32 * MIB);
    // A large segment bigger than the device.
    let config = AllocatorConfig::parse("large_segment_size_mb:40").unwrap();
    let err = CachingAllocator::new(dev.clone(), config).unwrap_err();
    let (key, value, reason) = invalid(&err);
    assert_eq!((key, value), ("large_segment_size_mb", "40"), "{err}");
    assert!(reason.contains("32.00 MiB"), "{err}");
    // An expandable page bigger than the device.
    let config = AllocatorConfig::new().expandable_large_page(64 * MIB);
    let err = CachingAllocator::new(dev.clone(), config).unwrap_err();
    assert_eq!(invalid(&err).0, "expandable_large_page_mb", "{err}");
    // A zero limit allows nothing: refused when parsed and when built.
    let err = AllocatorConfig::parse("limit_mb:0").unwrap_err();
    assert_eq!(invalid(&err).0, "limit_mb", "{err}");
    let err =
        CachingAllocator::new(dev.clone(), AllocatorConfig::new().limit_bytes(0)).unwrap_err();
    assert_eq!(invalid(&err).0, "limit_mb", "{err}");
    // An absurd size is refused by name, not overflowed into an out-of-memory error.
    let err = AllocatorConfig::parse("large_segment_size_mb:18446744073709551615").unwrap_err();
    assert_eq!(invalid(&err).0, "large_segment_size_mb", "{err}");
    // The defaults are not refused on a small device (requests needing a 20 MiB segment fail
    // as out of memory, as in PyTorch).
    CachingAllocator::new(device(8 * MIB), AllocatorConfig::new()).unwrap();
    // What fits works.
    let alloc = CachingAllocator::new(
        dev.clone(),
        AllocatorConfig::parse("large_segment_size_mb:30").unwrap(),
    )
    .unwrap();
    drop(alloc.alloc(3 * MIB, &dev.default_stream()).unwrap());
    assert_eq!(alloc.memory_reserved(), 30 * MIB);
}

#[test]
fn a_misspelt_key_suggests_the_nearest_valid_one() {
    for (typo, nearest) in [
        ("max_split_size:128", "max_split_size_mb"),
        (
            "garbage_colection_threshold:0.5",
            "garbage_collection_threshold",
        ),
        ("expandable_segment:true", "expandable_segments"),
        ("Record_History:true", "record_history"),
        ("limit:100", "limit_mb"),
    ] {
        let err = AllocatorConfig::parse(typo).unwrap_err();
        assert!(
            matches!(err, AllocError::UnknownConfigKey { .. }),
            "{err:?}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("did you mean '{nearest}'")),
            "{typo}: {msg}"
        );
    }
    // Nothing near: no suggestion, but the message lists the valid keys.
    let msg = AllocatorConfig::parse("zzz:1").unwrap_err().to_string();
    assert!(!msg.contains("did you mean"), "{msg}");
    assert!(
        msg.contains("valid keys") && msg.contains("max_split_size_mb"),
        "{msg}"
    );
}

#[test]
fn an_interval_given_twice_in_the_divisions_table_is_refused_naming_it() {
    for (table, interval) in [
        ("[256:4,256:8]", "256 MiB"),
        ("[64:2,256:4,256:4]", "256 MiB"),
        // 32 GiB and above is one interval, the last.
        ("[32768:4,65536:8]", "32768 MiB"),
        // `>` covers every interval after the previous entry.
        ("[64:2,>:4,128:8]", "128 MiB"),
        ("[64:2,>:4,>:8]", ">"),
    ] {
        let text = format!("roundup_power2_divisions:{table}");
        let err = AllocatorConfig::parse(&text).unwrap_err();
        let (key, value, reason) = invalid(&err);
        assert_eq!((key, value), ("roundup_power2_divisions", table), "{text}");
        assert!(
            reason.contains(interval) && reason.contains("twice"),
            "{text}: {reason}"
        );
        let msg = err.to_string();
        assert!(msg.contains("roundup_power2_divisions"), "{msg}");
    }
    // Each interval once is fine, in any order.
    for table in ["[64:2,256:4,>:8]", "[256:4,64:2]", "[>:4]"] {
        let text = format!("roundup_power2_divisions:{table}");
        AllocatorConfig::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
    }
}
