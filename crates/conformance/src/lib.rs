//! braid's conformance suite: one generic set of cases every backend must pass.
//!
//! Each case is a public generic function `fn(&Harness<B>) -> Result<(), CaseError>` that
//! exercises the front layer ([`braid_stream_core`]), the caching allocator
//! ([`braid_allocator`], module [`allocator`]; the pinned host allocator, module [`pinned`]; sleep mode, module [`sleep`]) or graph capture ([`braid_graph_capture`],
//! module [`graph`]) on devices made by the harness, and names the peer scenario it reproduces
//! (`B13`… from `reference/workloads.md`, section 2). Every case that provokes an error ends by
//! proving the device still works ([`check_device_works`]); the allocator and graph cases also
//! prove the allocator still serves and computes correctly.
//!
//! A backend runs the suite with one macro invocation, which expands to one `#[test]` per case
//! (`cargo test` lists `streams::default_stream_is_id_zero`, `capture::fork_join_capture_replays`,
//! and so on):
//!
//! ```ignore
//! use braid_backend_sim::{SimBackend, SimConfig, SimDevice};
//! use braid_stream_core::Device;
//!
//! braid_conformance::conformance_tests!(
//!     SimBackend,
//!     |ordinal| Device::new(SimDevice::new(SimConfig::new().ordinal(ordinal))),
//!     scale_body = sim_scale_body, // the user operator's host body
//!     node = sim_node,             // the first n devices of a fresh node
//! );
//! ```
//!
//! One case can also be run on its own:
//!
//! ```
//! use braid_backend_sim::{SimBackend, SimConfig, SimDevice};
//! use braid_conformance::{check_device_works, Harness};
//! use braid_stream_core::Device;
//!
//! let harness = Harness::<SimBackend>::new(|ordinal| {
//!     Device::new(SimDevice::new(SimConfig::new().ordinal(ordinal)))
//! });
//! braid_conformance::events::wait_event_matmul_chain(&harness).unwrap();
//! check_device_works(&harness.device().unwrap()).unwrap();
//! ```
//!
//! Cross-device cases (module [`cross_device`]) run on the devices of one node, which the
//! macro's `node = ...` factory opens ([`Harness::with_node`]). Collective cases (modules
//! [`collectives`] and [`collective_updates`], through [`braid_collective::Communicator`]) need a backend implementing
//! [`braid_collective::CollectiveBackend`] and have their own macro,
//! [`collective_conformance_tests!`], list [`COLLECTIVE_CASES`] and runner
//! [`run_all_collectives`].
//!
//! A harness told how many devices the machine has ([`Harness::with_device_count`]) skips a
//! case that needs more ([`CaseError::skip`], naming both counts) rather than failing it; the
//! test macros pass a skipped case, saying so on stderr.
//!
//! Tools run every case with [`run_all`], or one by one from [`cases`]; [`CASES`] names them. The list of cases lives in one
//! place (the hidden `__with_cases!` macro) from which the test macro, [`CASES`] and [`run_all`]
//! are all generated.
//!
//! Module [`child_process`] is a helper for the backends' own tests that run their second half
//! in another process (the two-process IPC tests): the test executable re-runs itself as the
//! child and the two exchange lines.
#![warn(missing_docs)]

#[macro_use]
mod support;

pub mod allocator;
pub mod capture;
pub mod capture_modes;
pub mod child_process;
pub mod collective_updates;
pub mod collectives;
pub mod context;
pub mod cross_device;
pub mod custom_ops;
pub mod errors;
pub mod events;
pub mod graph;
pub mod graph_updates;
mod harness;
pub mod kernels;
pub mod memory;
pub mod ops;
pub mod ops_attention;
pub mod ordering;
pub mod pinned;
pub mod sleep;
pub mod stream_pool;
pub mod streams;
pub mod tags;
pub mod task_groups;

pub use harness::{
    check_device_works, CaseError, DeviceFactory, Harness, NodeFactory, ScaleBodyFactory,
    ScaleOpArgs, LONG_WORK_NS,
};

/// The one list of cases, by module. Calls `$crate::$callback!` with `{ args }` followed by the
/// list, so every generated artefact (tests, [`CASES`], [`run_all`]) comes from here.
#[doc(hidden)]
#[macro_export]
macro_rules! __with_cases {
    ($callback:ident { $($args:tt)* }) => {
        $crate::$callback! {
            { $($args)* }
            streams: [
                default_stream_is_id_zero,
                same_stream_work_runs_in_order,
                wait_stream_fan_in_dag,
                record_wait_chain_s1_to_s2,
                wait_stream_on_itself_is_a_no_op,
                concurrent_threads_on_own_streams,
                stream_registry_finds_live_streams,
            ],
            events: [
                event_query_lifecycle,
                elapsed_time_is_positive,
                elapsed_requires_timing,
                elapsed_requires_record,
                wait_event_matmul_chain,
                event_waited_from_another_stream,
                event_sync_and_stream_query,
                one_event_waited_by_three_streams,
                wait_before_record_is_a_no_op,
                rerecord_moves_the_event,
                wait_async_resolves,
            ],
            ordering: [
                not_ordered_without_sync,
                ordered_after_wait_stream,
                ordered_after_event_wait,
                ordered_after_host_synchronize,
                ordered_after_completed_query,
                ordering_is_transitive,
                work_after_record_is_not_ordered,
                race_without_wait_reads_stale_data,
            ],
            cross_device: [
                cross_device_event_wait_orders_work,
                host_sync_of_one_device_leaves_another_pending,
                peer_copy_needs_peer_access,
                foreign_memory_needs_peer_access,
                record_stream_across_devices,
                graph_keeps_peer_buffers_alive,
            ],
            custom_ops: [
                bad_operator_declarations_are_typed_errors,
                foreign_work_takes_its_own_position,
                user_operator_with_a_body_captures_and_replays,
            ],
            kernels: [
                every_kernel_in_every_dtype,
            ],
            ops: [
                linear_silu_softmax_and_rms_norm_in_each_float_type,
                int64_positions_and_bool_masks_compute_exactly,
                operators_refused_by_their_declaration_never_reach_the_device,
                embeddings_indexing_and_index_copy_move_elements_by_ids,
                cat_where_triangles_and_arange_build_tensors_by_position,
                layer_norm_argmax_and_cumsum_follow_their_formulas,
                random_operators_draw_the_host_s_numbers,
                private_formats_round_trip_with_zero_padding,
            ],
            ops_attention: [
                rope_rotates_strided_heads_in_each_float_type,
                attention_prefill_and_cached_decode_in_each_float_type,
                attention_modes_compute_or_are_refused_by_name,
                a_captured_decode_step_takes_each_length_through_a_task_group_update,
            ],
            context: [
                nested_guards_restore_on_drop,
                guards_restore_while_unwinding,
                current_stream_is_per_thread,
                stream_switch_makes_tagged_stream_current,
                work_follows_the_current_stream,
            ],
            tags: [
                same_tag_same_stream,
                tag_priority_mismatch_refused,
                tagged_event_tag_in_use,
                unknown_tag_refused,
                tagged_record_wait_on_current_stream,
            ],
            task_groups: [
                task_group_update_changes_results,
                task_update_mismatch_is_typed_and_changes_nothing,
                task_group_of_another_graph_refused,
                task_update_racing_a_launch_refused,
                task_group_misuse_refused,
                end_capture_with_an_open_task_group_refused,
                panic_in_an_update_poisons_nothing,
            ],
            capture: [
                capture_on_default_stream_refused,
                begin_capture_twice_refused,
                end_capture_without_capture_refused,
                end_capture_on_joined_stream_refused,
                blocking_calls_forbidden_during_capture,
                default_stream_forbidden_during_global_capture,
                unjoined_stream_reported,
                capture_and_replay,
                fork_join_capture_replays,
                thread_local_and_relaxed_capture,
                capturing_stream_cannot_wait_on_eager_event,
                d2h_copy_refused_during_capture,
                graph_keeps_captured_buffers_alive,
            ],
            stream_pool: [
                leases_reuse_idle_streams,
                leases_from_many_threads,
            ],
            capture_modes: [
                helper_thread_exchanges_its_mode,
                capturing_thread_needs_relaxed_mode,
                exchange_outside_a_capture_refused,
                guards_dropped_out_of_order_restore_the_right_mode,
            ],
            errors: [
                objects_of_another_device_refused,
                allocation_beyond_capacity_is_oom,
                invalid_kernel_shapes_refused,
                copy_length_mismatch_refused,
            ],
            memory: [
                h2d_bytes_may_be_dropped_after_the_call,
                d2h_readback_not_ready_until_observed,
                d2d_copy,
                memset_sets_every_byte,
                mem_info_accounts_allocations,
                raw_copies_use_host_memory_in_place,
            ],
            allocator: [
                record_stream_gates_reuse,
                pending_block_waits_for_its_stream,
                pending_blocks_reclaimed_before_oom,
                in_capture_reuse_after_a_join,
                in_capture_reuse_waits_for_every_reader,
                record_tagged_stream_protects_data,
                return_flow_releases_without_event,
                automatic_mode_defers_reuse,
                automatic_mode_sees_unknown_streams,
                empty_cache_after_frees_and_a_synchronize_releases_pending_blocks,
                one_byte_alloc_and_free_restore_allocated,
                stats_of_256_floats,
                oom_message_and_healthy_device_after,
                oom_then_retry_after_free,
                memory_fraction_caps_reserved,
                size_rounding_settings,
                blocks_split_coalesce_and_stay_on_their_stream,
                pool_use_counts_and_packing,
                oom_retry_releases_default_cache_during_diversion,
                pool_destruction_releases_memory,
                freeable_pool_lives_while_an_output_does,
                pools_marked_use_on_oom_lend_at_out_of_memory,
                size_errors_leave_the_allocator_usable,
                config_errors_are_typed,
                invalid_arguments_refused,
                expandable_segments_grow_and_shrink,
                cached_block_shared_again_after_its_export_closed,
            ],
            pinned: [
                pinned_block_in_flight_is_not_reused,
                pinned_round_trip_and_empty_cache,
            ],
            sleep: [
                sleep_and_wake_keep_a_captured_graph_valid,
                bad_sleep_and_wake_calls_leave_things_usable,
                plain_graph_over_a_sleeping_pool_is_refused,
                update_naming_a_sleeping_buffer_is_refused,
            ],
            graph_updates: [
                updated_graph_keeps_its_new_buffers,
                updated_session_graph_keeps_its_new_buffers,
                runner_updates_keep_their_buffers,
            ],
            graph: [
                session_capture_and_replay,
                session_on_default_stream_refused,
                empty_session_gives_an_empty_graph,
                oom_inside_session_does_not_wedge,
                reset_and_recapture_into_the_same_pool,
                shared_pool_saves_one_small_segment,
                graph_pool_segment_accounting,
                side_stream_allocations_go_to_the_graph_pool,
                synchronize_inside_session_refused,
                repeated_sessions_do_not_leak,
                multi_stream_capture_survives_empty_cache,
                tagged_events_and_automatic_join,
                record_tagged_stream_inside_session,
                graph_pool_lives_while_used,
                graph_errors_leave_things_usable,
                runner_matches_eager_across_capture_and_replay,
                runner_captures_on_the_second_call_per_shape,
                runner_recaptures_moved_inputs,
                runners_share_a_user_pool,
                runner_on_tagged_streams_matches_eager,
                shared_pool_replay_order_is_checked,
            ],
        }
    };
}

/// Generates a list of case names and the function running them, from a case list: `{ NAMES
/// run_fn Bound }` names the constant, the function and the trait the backend must implement
/// (the collective cases need more than `Backend`).
#[doc(hidden)]
#[macro_export]
macro_rules! __define_registry {
    ({ $names:ident $run:ident $list:ident $bound:path } $( $module:ident : [ $($case:ident),* $(,)? ] ),* $(,)?) => {
        /// Every case of the list, as `module::case` (the test names the suite's macros
        /// generate).
        pub const $names: &[&str] = &[
            $( $( concat!(stringify!($module), "::", stringify!($case)), )* )*
        ];

        /// Every case of the list with its function, in the list's order, for tools that run
        /// the cases themselves (each on a thread of its own, say, as `cargo test` does: a
        /// case may leave thread-local state, such as the current stream, behind).
        pub fn $list<B: $bound>() -> Vec<Case<B>> {
            vec![
                $( $(
                    Case {
                        name: concat!(stringify!($module), "::", stringify!($case)),
                        run: $module::$case::<B>,
                    },
                )* )*
            ]
        }

        /// Runs every case of the list on devices from `harness`, in the list's order, on the
        /// calling thread. A case that panics is reported as failed, so one broken case does
        /// not stop the others.
        pub fn $run<B: $bound>(harness: &Harness<B>) -> Vec<(&'static str, Result<(), CaseError>)> {
            $list::<B>()
                .into_iter()
                .map(|case| (case.name, run_case(harness, case.run)))
                .collect()
        }
    };
}

/// One conformance case: its name (`module::case`) and its function.
pub struct Case<B: braid_stream_core::hal::Backend> {
    /// `module::case`, the name the suite's test macros give its test.
    pub name: &'static str,
    /// The case.
    pub run: fn(&Harness<B>) -> Result<(), CaseError>,
}

__with_cases!(__define_registry { CASES run_all cases braid_stream_core::hal::Backend });

/// The one list of collective cases (generic over
/// [`CollectiveBackend`](braid_collective::CollectiveBackend), so kept apart from
/// `__with_cases!`); calls `$crate::$callback!` like `__with_cases!`.
#[doc(hidden)]
#[macro_export]
macro_rules! __with_collective_cases {
    ($callback:ident { $($args:tt)* }) => {
        $crate::$callback! {
            { $($args)* }
            collectives: [
                all_reduce_sum,
                all_reduce_prod,
                all_reduce_max,
                all_reduce_min,
                all_reduce_avg,
                average_in_half_precision_does_not_overflow,
                integer_and_double_collectives,
                all_gather,
                reduce_scatter,
                broadcast_from_every_root,
                reduce_to_every_root,
                scatter_from_every_root,
                send_recv_ring,
                all_to_all,
                all_gather_v_uneven,
                reduce_scatter_v_uneven,
                all_to_all_v_uneven,
                variable_counts_refused_then_usable,
                overlapping_buffers_are_refused,
                batch_send_recv_all_pairs,
                group_ring_sends_first,
                batch_send_recv_mismatch_is_refused,
                group_left_open_is_refused,
                async_error_after_an_incomplete_collective,
                sub_communicator_reduces_its_members_only,
            ],
            collective_updates: [task_update_reissues_an_all_reduce],
        }
    };
}

__with_collective_cases!(__define_registry {
    COLLECTIVE_CASES run_all_collectives collective_cases braid_collective::CollectiveBackend
});

/// Expands to one `#[test]` per conformance case for a backend.
///
/// `$backend` is the backend type and `$factory` an expression usable as
/// `Fn(u32) -> braid_stream_core::Result<Device<$backend>> + Send + Sync + 'static`: given an
/// ordinal it opens a fresh device. `scale_body = $bodies` makes the body of the suite's user
/// operator `y = factor * x` on this backend (see [`Harness::with_scale_body`]); `node = $node`
/// opens the first `n` devices of one fresh node (see [`Harness::with_node`]). Tests are
/// grouped in modules named like the suite's (`streams`, `events`, `capture`, …); the
/// factories and the bodies are resolved in the invoking module.
///
/// ```ignore
/// braid_conformance::conformance_tests!(
///     SimBackend,
///     |ordinal| Device::new(SimDevice::new(SimConfig::new().ordinal(ordinal))),
///     scale_body = sim_scale_body,
///     node = sim_node,
/// );
/// ```
#[macro_export]
macro_rules! conformance_tests {
    ($backend:ty, $factory:expr, scale_body = $bodies:expr, node = $node:expr $(,)?) => {
        $crate::__with_cases!(__conformance_tests_impl {
            $backend,
            $factory,
            $bodies,
            $node
        });
    };
}

/// Expands to one `#[test]` per collective case (module [`collectives`]) for a backend that
/// implements [`CollectiveBackend`](braid_collective::CollectiveBackend); `node = $node` opens
/// the first `n` devices of one fresh node (see [`Harness::with_node`]). Devices are opened
/// only through it: `$factory` is the same single-device factory as for
/// [`conformance_tests!`].
///
/// ```ignore
/// braid_conformance::collective_conformance_tests!(SimBackend, sim_device, node = sim_node);
/// ```
#[macro_export]
macro_rules! collective_conformance_tests {
    ($backend:ty, $factory:expr, node = $node:expr $(,)?) => {
        $crate::__with_collective_cases!(__collective_tests_impl {
            $backend,
            $factory,
            $node
        });
    };
}

/// Implementation of [`collective_conformance_tests!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __collective_tests_impl {
    ({ $backend:ty, $factory:expr, $node:expr } $( $module:ident : [ $($case:ident),* $(,)? ] ),* $(,)?) => {
        $(
            mod $module {
                #[allow(unused_imports)]
                use super::*;
                $(
                    #[test]
                    fn $case() {
                        let harness = $crate::Harness::<$backend>::new($factory).with_node($node);
                        $crate::report_case(
                            concat!(stringify!($module), "::", stringify!($case)),
                            $crate::run_case(&harness, $crate::$module::$case::<$backend>),
                        );
                    }
                )*
            }
        )*
    };
}

/// Implementation of [`conformance_tests!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_tests_impl {
    ({ $backend:ty, $factory:expr, $bodies:expr, $node:expr } $( $module:ident : [ $($case:ident),* $(,)? ] ),* $(,)?) => {
        $(
            mod $module {
                #[allow(unused_imports)]
                use super::*;
                $(
                    #[test]
                    fn $case() {
                        let harness =
                            $crate::Harness::<$backend>::new($factory)
                                .with_scale_body($bodies)
                                .with_node($node);
                        $crate::report_case(
                            concat!(stringify!($module), "::", stringify!($case)),
                            $crate::run_case(&harness, $crate::$module::$case::<$backend>),
                        );
                    }
                )*
            }
        )*
    };
}

/// How a generated `#[test]` ends for case `name`: a failure panics with its message; a skip
/// ([`CaseError::skip`]: the machine has too few devices) is said on stderr and passes, as
/// `cargo test` has no skipped outcome.
#[track_caller]
pub fn report_case(name: &str, result: Result<(), CaseError>) {
    match result {
        Ok(()) => {}
        Err(err) if err.skipped => eprintln!("{name} skipped: {}", err.message),
        Err(err) => panic!("{name} failed: {err}"),
    }
}

/// Runs one case, turning a panic inside it into a [`CaseError`].
pub fn run_case<B: braid_stream_core::hal::Backend>(
    harness: &Harness<B>,
    case: fn(&Harness<B>) -> Result<(), CaseError>,
) -> Result<(), CaseError> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| case(harness))) {
        Ok(result) => result,
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".to_string());
            Err(CaseError::new(format!("the case panicked: {message}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CASES;
    use std::collections::BTreeSet;

    #[test]
    fn a_case_needing_more_devices_than_the_machine_has_is_a_skip_naming_both() {
        use braid_backend_sim::{NodeConfig, SimBackend, SimConfig, SimDevice, SimMode, SimNode};
        use braid_stream_core::Device;
        let open = |ordinal| Device::new(SimDevice::new(SimConfig::new().ordinal(ordinal)));
        let node = |n| {
            let config = NodeConfig::new(n).device(SimConfig::new().mode(SimMode::Data));
            SimNode::new(config)
                .devices()
                .into_iter()
                .map(Device::new)
                .collect()
        };
        let harness = super::Harness::<SimBackend>::new(open)
            .with_node(node)
            .with_device_count(2);
        assert_eq!(harness.node(2).unwrap().len(), 2);
        harness.device_with_ordinal(1).unwrap();
        let err = harness.node(4).unwrap_err();
        assert!(err.skipped, "{err}");
        assert_eq!(err.message, "needs 4 devices, this machine has 2");
        let err = harness.device_with_ordinal(2).unwrap_err();
        assert!(
            err.skipped && err.message.contains("needs 3 devices"),
            "{err}"
        );
        // A collective case on 4 ranks is skipped, not failed; a failure stays a failure.
        let err = super::run_case(&harness, super::collectives::all_reduce_sum).unwrap_err();
        assert!(err.skipped, "{err}");
        assert!(!super::CaseError::new("broken").skipped);
        super::report_case("collectives::all_reduce_sum", Err(err));
    }

    #[test]
    fn case_names_are_unique_and_enough() {
        let unique: BTreeSet<_> = CASES.iter().collect();
        assert_eq!(unique.len(), CASES.len());
        assert!(CASES.len() >= 35, "only {} cases", CASES.len());
        // Test functions live in per-module `mod`s, so case names must be unique across them
        // only within a module; keep them unique overall anyway for readable reports.
        let bare: BTreeSet<_> = CASES.iter().map(|c| c.rsplit("::").next()).collect();
        assert_eq!(bare.len(), CASES.len());
    }

    #[test]
    fn the_case_lists_hold_the_named_cases_in_order() {
        use braid_backend_sim::SimBackend;
        let names: Vec<_> = super::cases::<SimBackend>()
            .iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(names, CASES);
        let names: Vec<_> = super::collective_cases::<SimBackend>()
            .iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(names, super::COLLECTIVE_CASES);
    }
}
