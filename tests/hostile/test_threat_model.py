"""Every claim of docs/threat-model.md has a test (issue 38, point 8): the claim ids are read
from the doc, each maps to tests that exist, and a claim marked pending in the doc is listed
in :data:`PENDING` (and nowhere else), to be wired to its test when it holds.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "threat-model.md"
CLAIM_RE = re.compile(r"^\*\*(T\d+[a-z]?)\*\*(.*?)(?=^\*\*T\d+[a-z]?\*\*|^## |\Z)",
                      re.M | re.S)

#: claim -> the tests that check it (``path::function``)
TESTS = {
    "T1": ["tests/hostile/test_guarded.py::test_a_fifo_is_refused_without_blocking",
           "tests/hostile/test_guarded.py::test_a_device_is_refused",
           "tests/hostile/test_guarded.py::"
           "test_a_link_out_of_the_capture_is_refused_and_one_inside_followed",
           "tests/hostile/test_hostile.py::test_case_ends_in_exit_0_or_2_with_one_line"],
    "T2": ["tests/hostile/test_hostile.py::test_case_ends_in_exit_0_or_2_with_one_line",
           "tests/hostile/test_guarded.py::test_a_file_over_its_cap_is_refused_before_it_is_read"],
    "T3": ["tests/hostile/test_linear_time.py::test_a_long_line_parses_in_linear_time",
           "tests/hostile/test_linear_time.py::test_a_long_log_parses_in_linear_time",
           "tests/hostile/test_round4_importers.py::test_probe_line_pairs_parse_in_linear_time"],
    "T4": ["tests/importers/test_log_chains.py::"
           "test_assert_then_chain_then_engine_dead_is_one_crash",
           "tests/importers/test_log_chains.py::test_a_chained_traceback_is_one_event_on_its_own_line",
           "tests/importers/test_log_chains.py::test_probe_start_and_stop_are_not_crash_events"],
    "T5": ["tests/hostile/test_linear_time.py::test_the_duplicate_segment_check_is_linear",
           "tests/hostile/test_linear_time.py::test_the_duplicate_check_still_finds_a_copy_among_many"],
    "T6": ["tests/hostile/test_round2.py::test_terminal_output_holds_no_control_character",
           "tests/hostile/test_round2.py::test_html_keys_are_escaped_and_the_csp_allows_only_our_styles",
           "tests/hostile/test_round2.py::"
           "test_markdown_summary_keeps_one_table_one_code_block_and_no_raw_html",
           "tests/hostile/test_round2.py::test_csv_cells_never_start_a_formula"],
    "T7": ["tests/hostile/test_commands.py::test_a_variant_named_only_by_expected_json_is_refused",
           "tests/hostile/test_round2.py::test_check_runs_the_real_code_only_when_trusted"],
    "T8": ["tests/hostile/test_guarded.py::test_a_diff_variant_reads_its_diff_through_the_guards"],
    "T9": ["tests/hostile/test_round2.py::test_a_bound_past_the_cap_is_refused_before_the_replay"],
    "T10": ["tests/hostile/test_commands.py::test_the_obtained_file_never_writes_through_a_link",
            "tests/hostile/test_replace.py::"
            "test_a_sigkill_at_every_step_leaves_the_old_or_the_new_capture_whole"],
    "T11": ["tests/hostile/test_round2.py::test_redaction_leaves_no_private_string_in_any_file",
            "tests/hostile/test_round2.py::test_redaction_refuses_a_domain_it_cannot_permute"],
    "T12": ["tests/test_repro_data.py::test_the_repro_of_a_hostile_capture_holds_none_of_its_text",
            "tests/test_repro_data.py::"
            "test_the_repro_of_a_hostile_capture_runs_nothing_but_the_repro"],
    "T27p": ["tests/hostile/test_round5_probe.py::"
             "test_a_batch_cut_short_by_a_full_disk_leaves_every_other_batch_readable",
             "tests/hostile/test_round5_probe.py::"
             "test_an_event_cut_short_by_a_full_disk_leaves_the_events_readable",
             "tests/hostile/test_round5_probe.py::"
             "test_a_directory_the_system_refuses_is_one_configuration_line",
             "tests/hostile/test_round5_probe.py::test_a_very_long_setting_is_named_in_a_short_line",
             "tests/hostile/test_round5_probe.py::"
             "test_a_stalled_writer_process_costs_the_engine_one_wait",
             "tests/hostile/test_round5_probe.py::"
             "test_a_launch_copies_no_more_than_one_event_holds",
             "tests/hostile/test_round5_probe.py::"
             "test_a_rank_no_segment_name_holds_is_not_given_to_records",
             "tests/hostile/test_round5_probe.py::"
             "test_an_engine_id_no_manifest_should_hold_is_one_configuration_line",
             "tests/hostile/test_round5_probe.py::"
             "test_a_full_disk_is_one_line_on_the_engines_stderr_not_one_per_record",
             "tests/hostile/test_round5_probe.py::"
             "test_a_capture_directory_others_may_write_is_said_in_one_line",
             "tests/hostile/test_round5_probe.py::"
             "test_a_hung_writer_thread_costs_the_engine_one_bounded_wait"],
    "T13": ["tests/probe/test_probe_owns.py::test_a_real_probe_leaves_what_was_planted_alone",
            "tests/probe/test_probe_owns.py::test_each_kind_of_thing_in_the_way_is_left_alone",
            "tests/probe/test_probe_owns.py::"
            "test_an_inherited_folder_that_was_replaced_is_not_joined"],
    "T16": ["tests/hostile/test_triage_per_capture.py::"
            "test_every_capture_is_a_row_and_the_good_one_is_unchanged",
            "tests/hostile/test_triage_per_capture.py::"
            "test_a_capture_that_fails_is_its_row_with_one_line",
            "tests/hostile/test_triage_per_capture.py::test_open_many_skips_what_cannot_be_read"],
    "T17": ["tests/hostile/test_escaping.py::test_every_output_shows_the_character_as_an_escape",
            "tests/hostile/test_escaping.py::"
            "test_a_noncharacter_in_a_capture_name_keeps_the_svgs_well_formed",
            "tests/hostile/test_escaping.py::test_there_is_one_escaping_module"],
    "T14": ["tests/hostile/test_round3_caps.py::"
            "test_a_huge_num_sampled_is_capped_by_the_stored_ids",
            "tests/hostile/test_round3_caps.py::test_an_index_into_a_sparse_hole_is_refused",
            "tests/hostile/test_round3_caps.py::"
            "test_the_kernel_worker_refuses_a_buffer_past_the_budget",
            "tests/hostile/test_round3_caps.py::"
            "test_shrinks_window_over_a_huge_step_gap_lists_only_stored_steps",
            "tests/hostile/test_record_counts.py::"
            "test_every_field_at_its_extremes_is_refused_or_run_within_bounds",
            "tests/hostile/test_record_counts.py::"
            "test_a_budget_error_names_the_capture_file_record_field_and_fix",
            "tests/hostile/test_record_counts.py::"
            "test_a_launch_storage_past_the_budget_is_not_allocated"],
    "T30v": ["tests/hostile/test_round5_variants.py::"
             "test_a_diff_path_out_of_the_tree_or_of_another_spelling_is_refused",
             "tests/hostile/test_round5_variants.py::"
             "test_a_module_that_is_a_link_out_of_the_tree_is_refused",
             "tests/hostile/test_round5_variants.py::"
             "test_a_diff_path_no_file_can_have_is_one_line",
             "tests/hostile/test_round5_variants.py::"
             "test_a_change_the_applier_cannot_make_is_refused_not_skipped",
             "tests/hostile/test_round5_variants.py::"
             "test_a_hunk_header_of_thousands_of_digits_is_one_line",
             "tests/hostile/test_round5_variants.py::"
             "test_hunks_far_from_their_headers_are_refused_within_the_budget",
             "tests/hostile/test_round5_variants.py::"
             "test_one_file_patched_over_and_over_is_refused_within_the_budget",
             "tests/hostile/test_round5_variants.py::"
             "test_more_hunks_than_the_cap_are_refused_while_parsing",
             "tests/hostile/test_round5_variants.py::"
             "test_a_draft_count_past_its_tokens_by_overflow_is_refused",
             "tests/hostile/test_round5_variants.py::"
             "test_combine_tokens_positions_at_int64s_ends_wrap_and_are_judged",
             "tests/hostile/test_round5_variants.py::test_a_finding_at_int64s_end_keeps_its_value",
             "tests/hostile/test_round5_variants.py::"
             "test_an_unsigned_batch_change_tensor_replays_as_its_values",
             "tests/hostile/test_round5_variants.py::"
             "test_an_unsigned_value_past_int64_is_refused_naming_its_field",
             "tests/hostile/test_round5_variants.py::"
             "test_simulate_refuses_a_setting_past_its_range_before_it_runs"],
    "T15": ["tests/hostile/test_round3_caps.py::"
            "test_a_stuck_kernel_worker_times_out_and_the_replay_goes_on",
            "tests/hostile/test_round3_caps.py::"
            "test_a_stuck_notebook_cell_ends_as_that_cells_timeout",
            "tests/hostile/test_round3_caps.py::"
            "test_a_stuck_fleet_task_is_its_rows_timeout_and_the_others_finish",
            "tests/test_repro_data.py::test_a_call_past_its_deadline_fails_with_timed_out",
            "tests/fleet/test_fleet_200.py::"
            "test_a_stuck_ray_task_is_its_rows_timeout_and_the_others_finish"],
    "T35n": ["tests/hostile/test_round6_notebooks.py::"
             "test_a_cell_no_signal_reaches_is_killed_from_outside_with_its_group",
             "tests/hostile/test_round6_notebooks.py::"
             "test_a_report_ended_by_a_signal_leaves_no_notebook_process",
             "tests/hostile/test_round6_notebooks.py::"
             "test_a_capture_path_is_one_literal_of_the_parameters_cell",
             "tests/hostile/test_round6_notebooks.py::"
             "test_the_quickstart_report_of_a_hostile_name_is_inert",
             "tests/hostile/test_round6_notebooks.py::"
             "test_a_failing_cell_on_a_hostile_name_is_one_inert_line",
             "tests/hostile/test_round6_notebooks.py::"
             "test_a_progress_label_naming_a_hostile_file_is_inert",
             "tests/hostile/test_round6_notebooks.py::"
             "test_one_groups_report_past_its_deadline_leaves_the_others_written",
             "tests/hostile/test_round6_notebooks.py::"
             "test_a_file_that_is_no_notebook_is_one_line_naming_it"],
    "T18c": ["tests/hostile/test_round4_continuity.py::"
             "test_a_row_index_claimed_by_prev_req_id_to_index_sizes_nothing",
             "tests/hostile/test_round4_continuity.py::"
             "test_a_negative_row_start_names_no_element_from_the_end",
             "tests/hostile/test_round4_continuity.py::"
             "test_a_request_named_at_two_rows_or_a_row_held_twice_is_not_judged",
             "tests/hostile/test_round4_continuity.py::"
             "test_an_expected_id_out_of_range_is_not_a_substitution",
             "tests/hostile/test_round4_continuity.py::"
             "test_a_position_accepted_at_every_step_is_judged_in_linear_time",
             "tests/hostile/test_round4_continuity.py::"
             "test_the_report_tables_hold_a_step_near_int64s_end",
             "tests/hostile/test_round4_continuity.py::"
             "test_a_capture_whose_every_token_is_wrong_is_counted_not_listed",
             "tests/hostile/test_round4_continuity.py::"
             "test_a_manifest_section_that_is_no_object_is_refused_in_one_line"],
    "T19c": ["tests/hostile/test_round4_continuity.py::"
             "test_known_matches_no_failure_on_the_text_of_an_event_that_is_no_failure",
             "tests/hostile/test_round4_continuity.py::"
             "test_known_takes_the_runner_from_the_sites_a_capture_holds"],
    "T20k": ["tests/hostile/test_round4_kernels.py::"
             "test_a_view_reaching_outside_its_storage_is_refused",
             "tests/hostile/test_round4_kernels.py::"
             "test_a_repeated_view_is_not_materialised",
             "tests/hostile/test_round4_kernels.py::"
             "test_a_launchs_allocations_together_are_held_to_the_budget",
             "tests/hostile/test_round4_kernels.py::"
             "test_an_atomic_outside_every_storage_is_noted_and_not_performed",
             "tests/hostile/test_round4_kernels.py::"
             "test_a_stuck_replay_worker_times_out_and_the_other_launches_run",
             "tests/hostile/test_round4_kernels.py::"
             "test_a_worker_that_never_starts_is_waited_for_once",
             "tests/hostile/test_round4_kernels.py::"
             "test_a_module_planted_in_the_working_directory_is_not_imported",
             "tests/hostile/test_round4_kernels.py::"
             "test_the_v2_variant_worker_imports_nothing_from_the_working_directory",
             "tests/hostile/test_round4_kernels.py::"
             "test_a_kernel_summary_of_other_types_is_one_line_naming_its_field",
             "tests/hostile/test_round4_kernels.py::"
             "test_the_block_index_contract_is_linear_in_groups_and_positions",
             "tests/hostile/test_round4_kernels.py::"
             "test_json_output_holds_no_nan_or_infinity"],
    "T21r": ["tests/hostile/test_round4_repro.py::"
             "test_a_number_in_the_data_file_sizes_no_buffer_past_the_budget",
             "tests/hostile/test_round4_repro.py::"
             "test_an_async_output_case_builds_no_list_of_output_len_ids",
             "tests/hostile/test_round4_repro.py::"
             "test_an_embedding_case_allocates_no_weight_of_num_embeddings_rows",
             "tests/hostile/test_round4_repro.py::"
             "test_a_chain_record_that_disagrees_with_its_call_is_bad_data_not_a_vllm_bug",
             "tests/hostile/test_round4_repro.py::test_a_cell_the_call_could_not_write_is_refused",
             "tests/hostile/test_round4_repro.py::"
             "test_a_forged_data_file_cannot_make_the_test_print_escapes",
             "tests/hostile/test_round4_repro.py::"
             "test_a_duplicate_chain_record_does_not_drop_the_chain_by_its_place_in_the_capture",
             "tests/hostile/test_round4_repro.py::"
             "test_a_duplicate_origin_record_is_chosen_by_its_finding_not_its_place",
             "tests/hostile/test_round4_repro.py::test_a_data_file_nested_too_deep_is_bad_data",
             "tests/hostile/test_round4_repro.py::test_an_unhashable_site_is_bad_data",
             "tests/hostile/test_round4_repro.py::"
             "test_a_tensor_value_outside_its_dtype_is_bad_data_not_wrapped",
             "tests/hostile/test_round4_repro.py::"
             "test_a_v2_capture_whose_manifest_says_no_runner_keeps_the_combine_cases_chain",
             "tests/hostile/test_round4_repro.py::"
             "test_the_repro_of_a_hostile_v2_capture_holds_its_chain_as_data_and_runs_only_the_repro"],
    "T22s": ["tests/hostile/test_round4_shrink.py::test_the_window_replays_each_set_of_steps_once",
             "tests/hostile/test_round4_shrink.py::"
             "test_the_origins_of_the_witnesses_are_those_a_scan_finds",
             "tests/hostile/test_round4_shrink.py::"
             "test_a_witness_with_thousands_of_bad_ids_finds_their_origins",
             "tests/hostile/test_round4_shrink.py::"
             "test_finding_the_origins_of_thousands_of_bad_ids_is_linear"],
    "T23t": ["tests/hostile/test_round4_triage.py::test_a_link_to_a_capture_is_that_capture_once",
             "tests/hostile/test_round4_triage.py::test_a_folder_named_twice_is_read_once",
             "tests/hostile/test_round4_triage.py::test_stitching_is_linear_in_the_captures",
             "tests/hostile/test_round4_triage.py::test_a_huge_host_is_not_copied_onto_every_row"],
    "T24i": ["tests/hostile/test_round4_importers.py::"
             "test_an_unsigned_tensor_past_int64_is_refused_at_import",
             "tests/hostile/test_round4_importers.py::test_a_zip_member_given_twice_is_refused",
             "tests/hostile/test_round4_importers.py::"
             "test_a_safetensors_key_given_twice_is_refused",
             "tests/hostile/test_round4_importers.py::"
             "test_crash_events_past_the_events_file_limit_are_refused_before_writing",
             "tests/hostile/test_round4_importers.py::"
             "test_crash_events_of_several_logs_past_the_count_are_refused",
             "tests/hostile/test_round4_importers.py::"
             "test_a_zip_listing_many_members_is_refused_before_they_are_parsed"],
    "T25e": ["tests/hostile/test_round4_expected.py::"
             "test_an_expected_file_past_what_a_real_one_holds_is_one_line"],
    "T26h": ["tests/hostile/test_round4_store.py::"
             "test_a_planted_head_over_a_sparse_hole_claims_no_rows",
             "tests/hostile/test_round4_store.py::"
             "test_events_of_empty_lists_are_refused_before_they_fill_memory",
             "tests/hostile/test_round4_store.py::"
             "test_a_manifest_of_empty_lists_is_refused_before_it_is_parsed",
             "tests/hostile/test_round4_store.py::"
             "test_a_segment_named_like_another_is_refused_by_its_own_name",
             "tests/hostile/test_round4_store.py::"
             "test_an_open_capture_holds_no_descriptor_per_segment",
             "tests/hostile/test_round4_store.py::"
             "test_an_index_of_many_entries_over_a_hole_reads_none_of_it",
             "tests/hostile/test_round4_store.py::"
             "test_a_scanned_batch_over_a_hole_is_refused_before_its_columns_are_read",
             "tests/hostile/test_round4_store.py::"
             "test_releasing_per_chunk_touches_only_the_segments_in_use"],
    "T34j": [
             "tests/hostile/test_round6_judge.py::"
             "test_a_version_we_cannot_read_never_decides_the_clamp",
             "tests/hostile/test_round6_judge.py::"
             "test_a_capture_that_names_no_vllm_is_not_judged_by_the_installed_one",
             "tests/hostile/test_round6_judge.py::"
             "test_a_step_two_engines_claim_is_not_judged_against_the_other_engine",
             "tests/hostile/test_round6_judge.py::"
             "test_the_race_check_compares_no_step_a_site_holds_twice",
             "tests/hostile/test_round6_judge.py::"
             "test_a_silent_wrong_token_is_never_paired_across_two_engines_at_one_rank",
             "tests/hostile/test_round6_judge.py::"
             "test_one_request_at_two_rows_is_judged_as_neither",
             "tests/hostile/test_round6_judge.py::"
             "test_a_process_that_started_the_probe_again_and_died_is_called_died",
             "tests/hostile/test_round6_judge.py::"
             "test_a_patchs_own_reads_explain_no_crash",
             "tests/hostile/test_round6_judge.py::"
             "test_a_crash_dump_event_states_only_what_a_dump_config_line_holds",
             "tests/hostile/test_round6_judge.py::"
             "test_a_fact_from_a_crash_dump_says_so_where_it_decides",
             "tests/hostile/test_round6_judge.py::"
             "test_a_previous_row_two_requests_claim_names_neither_as_its_holder",
             "tests/hostile/test_round6_judge.py::"
             "test_the_first_crash_event_is_the_earliest_not_the_first_file_read",
             "tests/hostile/test_round6_judge.py::"
             "test_a_fact_spelled_as_no_name_neither_matches_nor_contradicts"],
    "T31l": [
            "tests/hostile/test_round5_leftovers.py::"
            "test_repro_refuses_an_output_inside_the_capture_it_reads",
            "tests/hostile/test_round5_leftovers.py::"
            "test_a_record_lacking_a_field_or_of_the_wrong_kind_is_bad_data",
            "tests/hostile/test_round5_leftovers.py::"
            "test_an_optional_field_the_call_reads_is_bad_data_not_a_key_error",
            "tests/hostile/test_round5_leftovers.py::"
            "test_recovery_never_renames_a_planted_link_into_place",
            "tests/hostile/test_round5_leftovers.py::"
            "test_a_link_planted_at_this_process_build_path_is_never_written_through",
            "tests/hostile/test_round5_leftovers.py::"
            "test_a_capture_of_more_segments_than_can_be_mapped_is_refused_up_front",
            "tests/hostile/test_round5_leftovers.py::"
            "test_a_map_refused_for_want_of_memory_names_the_map_count",
            "tests/hostile/test_round5_leftovers.py::"
            "test_a_segment_truncated_after_it_was_opened_is_one_line_not_sigbus",
            "tests/hostile/test_round5_leftovers.py::"
            "test_kernel_replays_stop_at_the_overall_deadline",
            "tests/hostile/test_round5_leftovers.py::"
            "test_open_many_stores_a_long_capture_path_once_not_on_every_row"],
    "T37e": ["tests/hostile/test_round6_redact.py::"
             "test_vllm_torch_and_cuda_error_lines_are_kept_word_for_word",
             "tests/hostile/test_round6_redact.py::test_a_word_no_error_text_uses_becomes_text",
             "tests/hostile/test_round6_redact.py::"
             "test_a_random_looking_identifier_is_not_known_though_its_parts_are_words",
             "tests/hostile/test_round6_redact.py::"
             "test_the_vocabulary_holds_no_names_of_people_or_places",
             "tests/hostile/test_round6_redact.py::"
             "test_redact_leaves_no_free_text_word_in_any_file",
             "tests/hostile/test_round5_share.py::test_public_error_text_is_linear_in_its_text"],
    "T32l": [
            "tests/hostile/test_round6_leftovers.py::"
            "test_a_command_given_no_capture_folder_says_so_in_one_line",
            "tests/hostile/test_round6_leftovers.py::"
            "test_a_folder_this_user_cannot_read_is_said_to_be_one",
            "tests/hostile/test_round6_leftovers.py::"
            "test_a_full_disk_at_close_leaks_no_descriptor",
            "tests/hostile/test_round6_leftovers.py::"
            "test_a_full_disk_as_a_segment_is_made_leaks_no_descriptor",
            "tests/hostile/test_round6_leftovers.py::"
            "test_a_writer_thread_hung_in_fsync_costs_the_engine_one_bounded_wait",
            "tests/hostile/test_round6_leftovers.py::"
            "test_a_writer_thread_hung_opening_the_capture_never_blocks_the_engine",
            "tests/hostile/test_round6_leftovers.py::"
            "test_closing_with_a_stalled_writer_process_costs_no_second_wait",
            "tests/hostile/test_round6_leftovers.py::"
            "test_a_writer_process_that_cannot_start_says_why_in_one_line",
            "tests/hostile/test_round6_leftovers.py::"
            "test_a_killed_writer_process_is_named_by_its_signal",
            "tests/hostile/test_round6_leftovers.py::"
            "test_the_frames_a_lost_writer_never_read_are_written_again_the_others_named",
            "tests/hostile/test_round6_leftovers.py::"
            "test_a_writer_process_that_could_not_start_loses_no_record"],
    "T29d": ["tests/hostile/test_round5_share.py::"
             "test_an_npz_member_of_zero_byte_elements_is_refused_by_its_count",
             "tests/hostile/test_round5_share.py::"
             "test_an_npz_string_member_unpacking_to_millions_of_strings_is_refused",
             "tests/hostile/test_round5_share.py::test_an_npz_json_text_past_its_length_is_refused",
             "tests/hostile/test_round5_share.py::"
             "test_a_safetensors_metadata_json_text_past_its_length_is_refused",
             "tests/hostile/test_round5_share.py::"
             "test_sources_holding_more_than_one_import_holds_are_refused_before_writing",
             "tests/hostile/test_round5_share.py::"
             "test_logs_of_many_records_are_held_to_one_imports_total",
             "tests/hostile/test_round5_share.py::"
             "test_redaction_takes_the_captures_request_ids_out_of_event_error_text",
             "tests/hostile/test_round5_share.py::"
             "test_redaction_takes_bare_hosts_and_homes_out_of_event_error_text",
             "tests/hostile/test_round5_share.py::"
             "test_request_ids_are_found_in_error_text_in_linear_time",
             "tests/hostile/test_round5_share.py::"
             "test_an_expected_first_finding_past_what_a_real_one_holds_is_one_line",
             "tests/hostile/test_round5_share.py::test_redaction_drops_numbers_no_json_holds",
             "tests/hostile/test_round5_share.py::"
             "test_a_ragged_list_given_for_a_tensor_is_one_line_naming_the_field",
             "tests/hostile/test_round5_share.py::test_ddmin_memory_is_linear_in_the_items",
             "tests/hostile/test_round5_share.py::"
             "test_a_safetensors_dtype_that_is_not_a_string_is_one_line",
             "tests/hostile/test_round5_share.py::test_public_error_text_is_linear_in_its_text",
             "tests/hostile/test_round5_share.py::"
             "test_error_text_is_dropped_when_request_ids_have_too_many_lengths"],
    "T28o": ["tests/hostile/test_round5_present.py::"
             "test_plot_svgs_of_a_hostile_capture_are_well_formed",
             "tests/hostile/test_round5_present.py::"
             "test_json_outputs_of_a_non_finite_manifest_are_strict",
             "tests/hostile/test_round5_present.py::"
             "test_known_text_holds_no_control_character",
             "tests/hostile/test_round5_present.py::"
             "test_check_text_of_a_forged_expected_holds_no_control_character",
             "tests/hostile/test_round5_present.py::"
             "test_the_pytest_plugin_shows_a_hostile_capture_as_inert_text",
             "tests/hostile/test_round5_present.py::"
             "test_the_report_of_a_hostile_capture_shows_its_text_inert",
             "tests/hostile/test_round5_present.py::"
             "test_plot_of_a_capture_of_no_records_draws_every_kind",
             "tests/hostile/test_round5_present.py::"
             "test_the_pytest_plugin_collects_beside_a_folder_nested_past_pythons_recursion",
             "tests/hostile/test_round5_present.py::"
             "test_a_fact_that_is_no_boolean_neither_matches_nor_contradicts",
             "tests/hostile/test_round5_present.py::"
             "test_markdown_of_a_string_of_backticks_or_brackets_is_linear",
             "tests/hostile/test_round5_present.py::"
             "test_the_pytest_plugin_shows_an_unexpected_error_quoting_a_capture_as_inert_text"],
    "T38a": ["tests/hostile/test_round7_compressed.py::"
             "test_a_compressed_batch_is_refused_before_it_is_decoded",
             "tests/hostile/test_round7_compressed.py::"
             "test_open_many_skips_a_capture_with_a_compressed_batch",
             "tests/hostile/test_round7_compressed.py::"
             "test_the_header_reader_agrees_with_pyarrows_writer"],
    "T38b": ["tests/hostile/test_round7_schema.py::"
             "test_a_schema_past_its_size_is_refused_before_it_is_decoded",
             "tests/hostile/test_round7_schema.py::"
             "test_distinct_schemas_past_the_captures_budget_are_refused",
             "tests/hostile/test_round7_schema.py::"
             "test_segments_of_one_schema_share_it_within_the_budget",
             "tests/hostile/test_round7_schema.py::"
             "test_the_writer_makes_no_schema_the_reader_refuses"],
    "T38c": ["tests/hostile/test_round7_aliased.py::test_a_batch_of_aliased_buffers_is_refused",
             "tests/hostile/test_round7_aliased.py::test_no_batch_a_writer_made_is_refused"],
    "T38d": ["tests/hostile/test_round7_encodings.py::"
             "test_a_wide_log_is_refused_naming_its_encoding",
             "tests/hostile/test_round7_encodings.py::test_a_utf8_byte_order_mark_changes_nothing"],
    "T38e": ["tests/hostile/test_round7_budget.py::test_a_budget_that_is_no_size_is_one_line",
             "tests/hostile/test_round7_budget.py::"
             "test_the_generated_repro_reads_the_budget_as_forensics_does",
             "tests/hostile/test_round7_digits.py::test_a_set_number_of_other_digits_is_one_line",
             "tests/hostile/test_round7_digits.py::"
             "test_a_planted_build_of_other_digits_stops_no_clean_up"],
    "T39s": ["tests/hostile/test_round8_encodings.py::"
             "test_a_wide_log_without_a_mark_is_refused_naming_its_encoding",
             "tests/hostile/test_round8_encodings.py::"
             "test_a_short_wide_log_is_refused_and_a_long_one_read_only_in_its_prefix",
             "tests/hostile/test_round8_encodings.py::test_a_real_vllm_log_is_never_refused",
             "tests/hostile/test_round8_encodings.py::"
             "test_binary_ish_content_is_not_taken_for_wide_text"],
    "T39t": ["tests/hostile/test_round8_shrink.py::test_every_step_of_the_chain_is_needed",
             "tests/hostile/test_round8_shrink.py::"
             "test_a_capture_whose_every_step_is_needed_shrinks_in_linear_time",
             "tests/hostile/test_round8_shrink.py::"
             "test_a_search_within_its_budget_is_still_one_minimal",
             "tests/hostile/test_round8_shrink.py::"
             "test_shrink_says_when_it_stopped_at_its_budget"],
    "T44a": ["tests/hostile/test_round9_shrink9.py::"
             "test_a_chain_of_needed_steps_shrinks_to_its_witness_records",
             "tests/hostile/test_round9_shrink9.py::"
             "test_shrinking_the_chain_costs_a_few_replays_of_it"],
    "T44b": ["tests/hostile/test_round9_shrink9.py::test_shrink_keeps_the_kernel_launches"],
    "T44c": ["tests/hostile/test_round9_shrink9.py::"
             "test_redact_names_the_kernel_launches_it_drops"],
    "T44d": ["tests/hostile/test_round9_shrink9.py::"
             "test_the_redacted_manifest_names_what_went_from_the_events"],
    "T44e": ["tests/hostile/test_round9_shrink9.py::"
             "test_redact_keeps_apart_the_processes_that_wrote_events"],
    "T44f": ["tests/hostile/test_round9_shrink9.py::"
             "test_a_capture_whose_replay_raises_is_shrunk_to_the_record_that_raises"],
    "T44g": ["tests/hostile/test_round9_shrink9.py::"
             "test_a_shrunk_capture_shrunk_again_keeps_what_was_done_first"],
    "T39p": ["tests/hostile/test_round8_probe8.py::"
             "test_a_writer_resumed_just_before_the_close_writes_what_it_was_given",
             "tests/hostile/test_round8_probe8.py::"
             "test_a_writer_still_stopped_at_the_close_is_ended_after_one_short_look",
             "tests/hostile/test_round8_probe8.py::"
             "test_records_a_killed_writer_wrote_after_its_last_ack_are_counted_written",
             "tests/hostile/test_round8_probe8.py::"
             "test_records_a_stalled_writer_wrote_before_the_close_killed_it_are_counted_written"],
    "T39q": ["tests/hostile/test_round8_probe8.py::"
             "test_a_stop_in_another_process_events_file_does_not_hide_a_death",
             "tests/hostile/test_round8_probe8.py::"
             "test_a_capture_written_again_keeps_each_process_and_a_planted_file_claims_none"],
    "T39a": ["tests/hostile/test_round8_attack.py::"
             "test_a_crash_verdict_not_computed_is_no_difference",
             "tests/hostile/test_round8_attack.py::test_a_crash_verdict_that_differs_is_still_said",
             "tests/hostile/test_round8_attack.py::"
             "test_an_expected_value_no_replay_gives_is_refused",
             "tests/hostile/test_round8_attack.py::"
             "test_a_key_an_expected_finding_lacks_is_unknown_never_none",
             "tests/hostile/test_round8_check.py::"
             "test_check_refuses_a_variant_it_cannot_build_in_one_line",
             "tests/hostile/test_round8_check.py::"
             "test_check_of_a_variant_it_can_build_but_expected_lacks_still_says_so"],
    "T39b": ["tests/hostile/test_round8_attack.py::"
             "test_a_resolution_past_its_range_is_one_line_before_the_replay",
             "tests/hostile/test_round8_attack.py::test_the_api_holds_a_resolution_to_the_same_range",
             "tests/hostile/test_round8_attack.py::"
             "test_a_backend_matplotlib_cannot_load_is_one_line"],
    "T39c": ["tests/hostile/test_round8_attack.py::"
             "test_every_json_of_a_manifest_of_nan_and_infinity_is_strict"],
    "T39d": ["tests/hostile/test_round8_attack.py::"
             "test_a_capture_whose_manifest_holds_nan_is_shrunk_and_redacted",
             "tests/hostile/test_round8_attack.py::"
             "test_a_manifest_number_no_json_holds_is_read_as_its_text",
             "tests/hostile/test_round8_attack.py::"
             "test_a_capture_whose_events_hold_nan_is_shrunk_and_redacted"],
    "T39e": ["tests/hostile/test_round8_attack.py::"
             "test_simulate_refuses_steps_past_its_cap_before_drawing"],
    "T39f": ["tests/hostile/test_round8_attack.py::"
             "test_a_step_range_that_ends_before_it_starts_is_refused"],
    "T39g": ["tests/hostile/test_round8_attack.py::"
             "test_a_redacted_capture_of_a_failed_engine_says_it_failed",
             "tests/hostile/test_round8_attack.py::"
             "test_a_derived_capture_whose_crash_verdict_differs_is_not_written"],
    "T39h": ["tests/hostile/test_round8_attack.py::"
             "test_triage_groups_a_failed_engine_as_known_judges_it"],
    "T36f": ["tests/hostile/test_round6_fleet.py::"
             "test_a_task_that_kills_its_worker_leaves_the_other_rows",
             "tests/hostile/test_round6_fleet.py::"
             "test_a_task_that_kills_its_only_worker_leaves_the_other_rows",
             "tests/hostile/test_round6_fleet.py::test_a_task_on_one_worker_has_the_deadline",
             "tests/hostile/test_round6_fleet.py::"
             "test_a_task_raising_an_odd_exception_is_its_one_line_row",
             "tests/hostile/test_round6_fleet.py::"
             "test_a_task_queued_behind_stuck_ones_is_not_timed_out",
             "tests/hostile/test_round6_fleet.py::test_writing_a_large_group_out_is_linear",
             "tests/hostile/test_round6_fleet.py::"
             "test_one_long_value_does_not_pad_every_row_of_its_group",
             "tests/hostile/test_round6_fleet.py::"
             "test_the_json_output_of_an_undecodable_name_is_strict",
             "tests/hostile/test_round6_fleet.py::"
             "test_a_groups_title_is_bounded_whatever_its_captures_claim",
             "tests/hostile/test_round6_fleet.py::test_a_column_folding_onto_ours_is_namespaced",
             "tests/hostile/test_round6_fleet.py::"
             "test_duckdb_reads_our_columns_beside_a_folding_capture",
             "tests/hostile/test_round6_fleet.py::"
             "test_extras_of_two_captures_folding_onto_each_other_are_kept_apart",
             "tests/hostile/test_round6_fleet.py::"
             "test_ids_past_int64_beside_signed_ones_leave_only_their_capture_out",
             "tests/hostile/test_round6_fleet.py::"
             "test_a_divergence_of_uint64_ids_names_their_values"],
    "T33i": ["tests/hostile/test_round6_caps.py::"
             "test_a_safetensors_header_past_what_one_record_needs_is_refused_by_its_length",
             "tests/hostile/test_round6_caps.py::test_a_100_mib_safetensors_header_costs_no_memory",
             "tests/hostile/test_round6_caps.py::"
             "test_a_safetensors_header_of_a_million_lists_is_refused_before_it_is_parsed",
             "tests/hostile/test_round6_caps.py::"
             "test_an_expanded_pt_tensor_is_refused_by_the_bytes_its_storage_holds",
             "tests/hostile/test_round6_caps.py::test_a_pt_tensor_past_the_allocation_budget_is_refused",
             "tests/hostile/test_round6_caps.py::"
             "test_a_pickle_making_more_values_than_a_source_holds_is_refused_before_it_is_loaded",
             "tests/hostile/test_round6_caps.py::test_a_log_of_cr_only_line_ends_is_read_line_by_line",
             "tests/hostile/test_round6_caps.py::"
             "test_a_crash_dump_number_of_thousands_of_digits_is_left_out",
             "tests/hostile/test_round6_caps.py::"
             "test_the_import_progress_bar_shows_a_source_name_as_inert_text",
             "tests/hostile/test_round6_caps.py::test_combining_many_sources_is_linear_in_their_count",
             "tests/hostile/test_round6_caps.py::"
             "test_a_capture_file_swapped_for_a_link_after_its_check_is_not_followed",
             "tests/hostile/test_round6_caps.py::"
             "test_log_lines_placed_past_int64_by_another_source_name_the_log",
             "tests/hostile/test_round6_caps.py::"
             "test_a_log_whose_size_says_less_than_it_holds_is_read_only_to_its_cap",
             "tests/hostile/test_round6_caps.py::test_one_file_given_as_two_sources_is_refused"],
    "T40a": ["tests/hostile/test_round8b_kernels.py::"
             "test_a_block_size_past_the_positions_dtype_is_judged",
             "tests/hostile/test_round8b_kernels.py::test_a_bound_that_is_no_count_is_not_judged",
             "tests/hostile/test_round8b_kernels.py::test_a_count_bound_is_judged",
             "tests/hostile/test_round8b_kernels.py::"
             "test_a_bfloat16_index_is_judged_by_its_value_not_its_bits",
             "tests/hostile/test_round8b_kernels.py::"
             "test_a_bfloat16_live_difference_names_values"],
    "T40b": ["tests/hostile/test_round8b_kernels.py::"
             "test_what_a_replay_could_not_judge_is_said_in_text",
             "tests/hostile/test_round8b_kernels.py::"
             "test_a_record_of_no_source_hash_says_the_source_was_not_compared"],
    "T40c": ["tests/hostile/test_round8b_plugin.py::"
             "test_captures_whose_names_escape_alike_get_ids_of_their_own"],
    "T40d": ["tests/hostile/test_round8b_known.py::test_a_catalogue_nested_deep_is_one_line",
             "tests/hostile/test_round8b_known.py::"
             "test_a_catalogue_nested_within_the_limit_is_read"],
    "T40e": ["tests/hostile/test_round8b_fleet.py::"
             "test_leaving_out_unfit_captures_is_linear_in_the_fleet",
             "tests/hostile/test_round8b_fleet.py::"
             "test_every_unfit_capture_is_left_out_and_only_they"],
    "T40f": ["tests/hostile/test_round8b_kernels.py::test_a_launch_is_named_by_its_rank_too"],
    "T40g": ["tests/hostile/test_round8b_fleet.py::test_a_capture_named_like_a_glob_is_itself"],
    "T40h": ["tests/hostile/test_round8b_plugin.py::"
             "test_a_capture_reached_through_a_planted_link_is_not_written",
             "tests/hostile/test_round8b_plugin.py::"
             "test_a_linked_captures_comparison_writes_nothing_through_the_link"],
    "T42a": ["tests/hostile/test_round8d_escaping.py::test_no_two_values_escape_alike",
             "tests/hostile/test_round8d_escaping.py::test_ordinary_names_print_as_before",
             "tests/hostile/test_round8d_escaping.py::"
             "test_report_figures_name_two_captures_that_escape_alike_apart"],
    "T42b": ["tests/hostile/test_round8d_escaping.py::"
             "test_triage_shows_two_captures_that_escape_alike_as_two",
             "tests/hostile/test_round8d_escaping.py::"
             "test_triage_csv_holds_two_captures_that_escape_alike_as_two",
             "tests/hostile/test_round8d_escaping.py::"
             "test_triage_json_and_parquet_hold_two_captures_that_escape_alike_as_two"],
    "T42c": ["tests/hostile/test_round8d_escaping.py::test_no_two_values_escape_alike",
             "tests/hostile/test_round8d_escaping.py::test_ordinary_names_print_as_before"],
    "T42d": ["tests/hostile/test_round8d_fleet.py::"
             "test_an_unfit_capture_takes_no_innocent_one_of_a_like_label",
             "tests/hostile/test_round8d_fleet.py::test_labels_of_two_such_captures_differ"],
    "T42e": ["tests/hostile/test_round8d_kernels.py::"
             "test_no_launch_replayed_is_exit_2_with_one_line",
             "tests/hostile/test_round8d_kernels.py::test_a_capture_of_no_launch_is_exit_2",
             "tests/hostile/test_round8d_kernels.py::"
             "test_some_launches_replayed_is_exit_0_and_says_how_many_were_not"],
    "T48a": ["tests/hostile/test_round9_fleet9.py::"
             "test_an_engine_id_naming_a_capture_does_not_hide_its_divergence"],
    "T48b": ["tests/hostile/test_round9_fleet9.py::"
             "test_a_forked_copys_records_are_not_found_for_a_killed_writer"],
    "T48c": ["tests/hostile/test_round9_fleet9.py::"
             "test_two_groups_whose_versions_escape_alike_have_two_titles"],
    "T48d": ["tests/hostile/test_round9_fleet9.py::"
             "test_a_triage_output_inside_a_capture_it_reads_is_refused"],
    "T48e": ["tests/hostile/test_round9_fleet9.py::"
             "test_a_summary_extra_named_like_a_length_column_takes_no_records_length"],
    "T48f": ["tests/hostile/test_round9_fleet9.py::"
             "test_summary_extras_of_other_kinds_or_absent_leave_to_arrow_whole"],
    "T48g": ["tests/hostile/test_round9_fleet9.py::"
             "test_divergences_naming_captures_that_escape_alike_read_apart"],
    "T48h": ["tests/hostile/test_round9_fleet9.py::"
             "test_step_histories_of_other_record_counts_do_not_corroborate"],
    "T41a": ["tests/hostile/test_round8c_json.py::test_a_manifest_key_given_twice_is_refused",
             "tests/hostile/test_round8c_json.py::"
             "test_an_events_line_naming_a_key_twice_is_refused_naming_the_line",
             "tests/hostile/test_round8c_json.py::"
             "test_expected_verdicts_naming_a_key_twice_are_refused",
             "tests/hostile/test_round8c_json.py::test_the_repeated_key_is_shown_escaped",
             "tests/hostile/test_round8c_json.py::"
             "test_segment_metadata_naming_a_key_twice_is_refused",
             "tests/hostile/test_round8c_json.py::"
             "test_a_repro_data_file_naming_a_key_twice_is_bad_data",
             "tests/hostile/test_round8c_json.py::"
             "test_a_catalogue_naming_a_key_twice_is_refused",
             "tests/hostile/test_round8c_json.py::test_every_bundled_capture_holds_each_key_once",
             "tests/hostile/test_round4_importers.py::"
             "test_a_safetensors_key_given_twice_is_refused"],
    "T41b": ["tests/hostile/test_round8c_shell.py::"
             "test_a_shell_word_is_read_back_as_itself_and_prints_inert",
             "tests/hostile/test_round8c_shell.py::"
             "test_a_shell_path_starting_with_a_dash_is_no_option",
             "tests/hostile/test_round8c_shell.py::"
             "test_checks_hint_is_the_command_that_accepts_this_capture",
             "tests/hostile/test_round8c_shell.py::test_the_write_ups_commands_name_the_capture"],
    "T41c": ["tests/hostile/test_round8c_workers.py::"
             "test_triage_refuses_workers_past_the_cap_or_below_one",
             "tests/hostile/test_round8c_workers.py::"
             "test_run_local_refuses_workers_outside_the_cap_before_running",
             "tests/hostile/test_round8c_workers.py::test_never_more_processes_than_tasks"],
    "T41d": ["tests/hostile/test_round8c_tilde.py::"
             "test_every_output_option_writes_under_the_home_folder",
             "tests/hostile/test_round8c_tilde.py::"
             "test_repro_resolves_its_output_under_the_home_folder",
             "tests/hostile/test_round8c_tilde.py::test_an_unknown_user_is_one_line"],
    "T43a": ["tests/hostile/test_round9_left9.py::"
             "test_a_shell_word_names_the_same_file_in_dash_and_bash"],
    "T43b": ["tests/hostile/test_round9_left9.py::"
             "test_a_metadata_key_named_twice_is_refused_in_one_line",
             "tests/hostile/test_round9_left9.py::"
             "test_no_metadata_key_of_a_probe_segment_repeats"],
    "T43c": ["tests/hostile/test_round9_left9.py::test_an_unfit_capture_is_named_as_every_path_is"],
    "T43d": ["tests/hostile/test_round9_left9.py::"
             "test_a_crash_with_no_records_is_not_said_to_be_unexplained_by_values"],
    "T43e": ["tests/hostile/test_round9_left9.py::"
             "test_two_missing_captures_escaping_alike_are_named_apart"],
    "T47a": ["tests/hostile/test_round9_attack9c.py::"
             "test_a_diff_line_holding_a_line_separator_applies",
             "tests/hostile/test_round9_attack9c.py::"
             "test_lines_the_diff_does_not_touch_are_kept_byte_for_byte",
             "tests/hostile/test_round9_attack9c.py::"
             "test_a_crlf_file_keeps_its_line_ends_and_a_crlf_diff_applies",
             "tests/hostile/test_round9_attack9c.py::"
             "test_a_file_header_hidden_inside_a_line_patches_nothing_else"],
    "T47b": ["tests/hostile/test_round9_attack9c.py::"
             "test_a_dumped_request_named_twice_is_refused_naming_it",
             "tests/hostile/test_round9_attack9c.py::"
             "test_a_dump_naming_a_request_twice_leaves_its_batch_unknown"],
    "T47c": ["tests/hostile/test_round9_attack9c.py::"
             "test_sources_of_one_name_keep_their_folders_apart",
             "tests/hostile/test_round9_attack9c.py::"
             "test_sources_whose_names_differ_only_by_normalisation_or_case_are_told_apart"],
    "T47d": ["tests/hostile/test_round9_attack9c.py::"
             "test_the_repro_refuses_every_character_forensics_escapes"],
    "T47e": ["tests/hostile/test_round9_attack9c.py::"
             "test_an_npz_time_member_is_refused_naming_its_dtype"],
    "T47f": ["tests/hostile/test_round9_attack9c.py::"
             "test_a_first_finding_key_of_another_type_is_one_line_naming_it",
             "tests/hostile/test_round9_attack9c.py::"
             "test_a_verdict_the_replay_lacks_says_so_and_two_spellings_print_apart"],
    "T47g": ["tests/hostile/test_round9_attack9c.py::"
             "test_a_prompt_or_output_the_request_logger_quotes_is_no_crash"],
    "T47h": ["tests/hostile/test_round9_attack9c.py::"
             "test_an_expected_file_of_another_format_is_one_line_never_a_match",
             "tests/hostile/test_round9_attack9c.py::"
             "test_an_expected_file_without_a_format_is_read_as_format_1"],
    "T46a": ["tests/hostile/test_round9_attack9b.py::"
             "test_a_heatmap_of_a_wide_batch_over_many_steps_is_a_bounded_grid"],
    "T46b": ["tests/hostile/test_round9_attack9b.py::"
             "test_a_catalogue_clause_of_the_wrong_type_is_one_line_at_load",
             "tests/hostile/test_round9_attack9b.py::"
             "test_a_catalogue_of_the_right_types_still_matches"],
    "T46c": ["tests/hostile/test_round9_attack9b.py::"
             "test_a_catalogue_that_is_a_fifo_is_refused_without_blocking",
             "tests/hostile/test_round9_attack9b.py::"
             "test_a_catalogue_past_its_cap_is_refused_before_it_is_read"],
    "T46d": ["tests/hostile/test_round9_attack9b.py::"
             "test_the_demo_index_links_a_capture_named_like_a_script_as_a_file"],
    "T46e": ["tests/hostile/test_round9_attack9b.py::"
             "test_a_failing_cell_names_two_captures_spelled_alike_apart"],
    "T46f": ["tests/hostile/test_round9_attack9b.py::"
             "test_the_reports_events_table_grows_linearly_in_events_of_keys_of_their_own",
             "tests/hostile/test_round9_attack9b.py::"
             "test_the_events_table_folds_keys_past_its_columns_into_one_cell"],
    "T46g": ["tests/hostile/test_round9_attack9b.py::"
             "test_a_styled_table_past_pandas_render_cap_shows_every_row"],
    "T46h": ["tests/hostile/test_round9_attack9b.py::"
             "test_the_fleet_banner_over_a_report_is_styled_within_its_csp"],
    "T46i": ["tests/hostile/test_round9_attack9b.py::"
             "test_a_plot_of_a_diff_variant_named_with_dollars_draws"],
    "T45a": ["tests/hostile/test_round9_attack9a.py::"
             "test_a_simulation_of_more_tokens_than_four_soaks_is_one_line",
             "tests/hostile/test_round9_attack9a.py::"
             "test_the_simulate_command_writes_nothing_past_the_cap"],
    "T45b": ["tests/hostile/test_round9_attack9a.py::"
             "test_launches_of_nan_scalars_and_raw_addresses"],
    "T45c": ["tests/hostile/test_round9_attack9a.py::"
             "test_out_of_bounds_lanes_take_time_linear_in_lanes_and_tensors",
             "tests/hostile/test_round9_attack9a.py::"
             "test_out_of_bounds_lanes_are_attributed_as_before"],
    "T45d": ["tests/hostile/test_round9_attack9a.py::"
             "test_launches_of_nan_scalars_and_raw_addresses"],
    "T45e": ["tests/hostile/test_round9_attack9a.py::"
             "test_an_address_in_the_last_bytes_is_outside_every_tensor"],
    "T45f": ["tests/hostile/test_round9_attack9a.py::"
             "test_launches_of_nan_scalars_and_raw_addresses"],
    "T49a": ["tests/hostile/test_round9_msg9.py::"
             "test_a_bad_file_of_captures_named_alike_is_named_apart"],
    "T49b": ["tests/hostile/test_round9_msg9.py::test_sources_named_alike_are_named_apart"],
    "T49c": ["tests/hostile/test_round9_msg9.py::"
             "test_kernel_launches_of_captures_named_alike_are_named_apart",
             "tests/hostile/test_round9_msg9.py::"
             "test_fleet_rows_of_captures_named_alike_are_named_apart",
             "tests/hostile/test_round9_msg9.py::test_diffs_named_alike_are_named_apart",
             "tests/hostile/test_round9_msg9.py::"
             "test_expected_results_of_captures_named_alike_are_named_apart"],
    "T49d": ["tests/hostile/test_round9_msg9.py::"
             "test_an_os_error_names_files_named_alike_apart"],
    "T49e": ["tests/hostile/test_round9_lead.py::"
             "test_plot_refuses_a_folder_named_as_its_figure_before_replaying",
             "tests/hostile/test_round9_lead.py::test_an_output_that_cannot_be_written_is_named_apart"],
    "T50a": ["tests/fleet/test_ray_gather.py::test_a_task_slow_to_start_is_timed_from_its_start",
             "tests/fleet/test_ray_gather.py::test_a_started_task_past_its_backstop_is_cancelled",
             "tests/fleet/test_ray_gather.py::test_a_task_never_started_is_said_not_started",
             "tests/fleet/test_fleet_200.py::"
             "test_a_stuck_ray_task_is_its_rows_timeout_and_the_others_finish"],
    "T50b": ["tests/hostile/test_round10_lead.py::"
             "test_a_folder_that_is_not_the_probes_is_named_escaped",
             "tests/hostile/test_round10_lead.py::"
             "test_an_inherited_folder_not_joined_is_logged_escaped"],
    "T50c": ["tests/hostile/test_round10_lead.py::"
             "test_a_name_holding_a_character_drawn_as_nothing_reads_apart",
             "tests/hostile/test_round10_lead.py::"
             "test_a_suggested_command_gives_such_a_name_back_whole"],
    "T50d": ["tests/hostile/test_round10_lead.py::"
             "test_a_kernel_worker_that_died_is_an_illegal_access_only_by_its_signal"],
    "T50g": ["tests/hostile/test_round11_escapes.py::"
             "test_a_request_id_forges_nothing_in_a_finding_sentence_in_any_output",
             "tests/hostile/test_round11_escapes.py::"
             "test_two_request_ids_that_would_print_alike_read_apart",
             "tests/hostile/test_round11_escapes.py::"
             "test_a_kernel_finding_sentence_names_the_kernel_escaped"],
    "T50h": ["tests/hostile/test_round11_escapes.py::"
             "test_an_exception_quoting_a_capture_string_is_escaped_in_its_line",
             "tests/hostile/test_round11_escapes.py::test_our_own_message_is_not_escaped_twice",
             "tests/hostile/test_round11_escapes.py::"
             "test_a_notebook_that_cannot_be_run_is_named_escaped"],
    "T50i": ["tests/hostile/test_round11_escapes.py::"
             "test_a_raw_value_with_backticks_renders_as_itself_in_markdown",
             "tests/hostile/test_round11_escapes.py::"
             "test_capture_values_with_backticks_open_no_code_span_in_the_summary"],
    "T50j": ["tests/hostile/test_round11_escapes.py::"
             "test_no_two_spellings_of_a_name_print_alike",
             "tests/hostile/test_round11_escapes.py::test_a_name_in_nfc_prints_as_it_is",
             "tests/hostile/test_round11_escapes.py::"
             "test_a_name_not_in_nfc_shows_what_nfc_would_change",
             "tests/hostile/test_round11_escapes.py::"
             "test_a_suggested_command_names_an_nfd_file_apart_and_whole",
             "tests/hostile/test_round11_escapes.py::test_the_repro_refuses_a_word_not_in_nfc"],
    "T50k": ["tests/hostile/test_round11_escapes.py::"
             "test_a_suggested_command_for_a_name_ending_in_a_line_break_is_one_line"],
    "T51a": ["tests/hostile/test_round11_attack.py::"
             "test_a_line_quoting_crash_words_is_no_crash_by_its_words_alone",
             "tests/hostile/test_round11_attack.py::test_each_quoting_line_alone_is_no_crash",
             "tests/hostile/test_round11_attack.py::"
             "test_a_traceback_logged_as_a_warning_is_no_crash",
             "tests/hostile/test_round11_attack.py::test_a_probe_line_a_logger_quotes_is_no_record"],
    "T51b": ["tests/hostile/test_round11_attack.py::"
             "test_an_access_out_of_bounds_in_every_program_is_one_line",
             "tests/hostile/test_round11_attack.py::"
             "test_programs_folded_apart_say_they_are_not_every_one_between"],
    "T51c": ["tests/hostile/test_round11_attack.py::"
             "test_a_file_named_in_an_error_is_escaped_as_a_value"],
    "T51d": ["tests/hostile/test_round11_attack.py::"
             "test_a_pt_tensor_without_dense_values_is_one_true_line"],
    "T51e": ["tests/hostile/test_round11_attack.py::"
             "test_the_output_a_command_names_is_inert_text",
             "tests/hostile/test_round11_attack.py::"
             "test_the_refusal_of_changed_evidence_is_one_inert_line"],
    "T52a": ["tests/hostile/test_round12_outputs.py::"
             "test_no_command_writes_into_the_capture_it_reads",
             "tests/hostile/test_round12_outputs.py::test_demo_writes_into_no_capture_it_reads",
             "tests/hostile/test_round12_outputs.py::test_one_check_serves_every_command"],
    "T52b": ["tests/hostile/test_round12_outputs.py::"
             "test_no_output_goes_through_a_link_another_user_planted",
             "tests/hostile/test_round12_outputs.py::test_repro_writes_through_no_planted_link"],
    "T52c": ["tests/hostile/test_round12_outputs.py::"
             "test_a_link_of_the_user_or_outside_a_sticky_folder_is_followed",
             "tests/hostile/test_round12_outputs.py::"
             "test_the_users_own_link_to_an_output_folder_is_followed_by_a_command"],
    "T56a": ["tests/hostile/test_round13_atomic.py::"
             "test_a_link_swapped_in_while_a_file_is_written_is_not_followed",
             "tests/hostile/test_round13_atomic.py::"
             "test_a_link_swapped_in_while_a_capture_is_written_is_not_followed",
             "tests/hostile/test_round13_atomic.py::"
             "test_the_temporary_file_is_new_never_a_link_planted_at_its_name"],
    "T56b": ["tests/hostile/test_round13_atomic.py::"
             "test_a_reports_diff_names_never_enter_the_registry",
             "tests/hostile/test_round13_atomic.py::"
             "test_diff_names_are_known_in_their_context_only"],
    "T56c": ["tests/hostile/test_round13_atomic.py::"
             "test_summary_markdown_names_a_diff_by_its_file_name_and_its_commands_by_its_path",
             "tests/hostile/test_round13_atomic.py::"
             "test_summary_text_and_json_keep_the_path"],
    "T56d": ["tests/hostile/test_round13_atomic.py::"
             "test_a_failed_capture_write_names_the_real_path",
             "tests/hostile/test_round13_atomic.py::"
             "test_a_capture_writer_names_its_folder_by_its_real_path"],
    "T53a": ["tests/hostile/test_round12_attack.py::"
             "test_a_usage_error_prints_the_words_it_quotes_inert"],
    "T53b": ["tests/hostile/test_round12_attack.py::"
             "test_the_verdict_table_names_a_diff_variant_inert"],
    "T53c": ["tests/hostile/test_round12_attack.py::"
             "test_a_command_replaying_vllm_prints_no_line_of_torch"],
    "T53d": ["tests/hostile/test_round12_attack.py::"
             "test_the_suggested_accept_keeps_every_variant_checked"],
    "T54a": ["tests/hostile/test_round12_wave3.py::"
             "test_a_fact_of_the_wrong_type_is_unknown_and_named_refused",
             "tests/hostile/test_round12_wave3.py::test_the_other_capture_is_untouched",
             "tests/hostile/test_round12_wave3.py::test_no_output_shows_the_refused_values"],
    "T54b": ["tests/hostile/test_round12_wave3.py::"
             "test_a_report_names_a_diff_variant_by_its_file_name_not_its_folders",
             "tests/test_report.py::"
             "test_a_relative_diff_variant_reaches_the_notebook_as_its_absolute_path"],
    "T54c": ["tests/hostile/test_round12_wave3.py::"
             "test_a_combining_mark_after_an_escape_is_escaped",
             "tests/hostile/test_round12_wave3.py::"
             "test_a_shell_word_escapes_the_mark_after_an_escape_and_reads_back",
             "tests/hostile/test_round12_wave3.py::"
             "test_an_nfc_name_with_its_accents_prints_unchanged"],
    "T55a": ["tests/hostile/test_round13_cli.py::"
             "test_a_number_not_in_ascii_digits_is_refused_in_one_line",
             "tests/hostile/test_round13_cli.py::test_a_number_in_range_is_read_as_that_number"],
    "T55b": ["tests/hostile/test_round13_cli.py::"
             "test_a_number_past_its_range_is_refused_before_anything_runs",
             "tests/hostile/test_round13_cli.py::test_the_refused_value_is_inert",
             "tests/hostile/test_round13_cli.py::test_a_huge_value_is_cut_in_the_message",
             "tests/hostile/test_round13_cli.py::test_the_coarsest_resolution_draws_every_kind"],
    "T55c": ["tests/hostile/test_round13_cli.py::"
             "test_every_reader_takes_a_malformed_version_as_unknown",
             "tests/hostile/test_round13_cli.py::"
             "test_a_version_as_releases_spell_it_is_read_by_every_reader",
             "tests/hostile/test_round13_cli.py::"
             "test_a_version_missing_or_named_unknown_is_no_refusal",
             "tests/hostile/test_round13_cli.py::test_a_crash_dumps_malformed_version_states_none"],
    "T55d": ["tests/hostile/test_round13_cli.py::test_the_conclusion_says_the_version_is_unknown",
             "tests/hostile/test_round13_cli.py::test_a_long_version_never_decides_the_clamp",
             "tests/hostile/test_round13_cli.py::"
             "test_the_clamp_of_an_unknown_version_says_it_is_unknown"],
    "T58a": ["tests/hostile/test_round13_lead.py::"
             "test_inspect_shows_a_wrong_model_fact_unknown_and_names_it_refused",
             "tests/hostile/test_round13_lead.py::test_the_conclusion_names_a_refused_model_fact",
             "tests/hostile/test_round13_lead.py::"
             "test_the_known_issue_evidence_leaves_a_wrong_model_fact_out",
             "tests/hostile/test_round13_lead.py::"
             "test_a_crash_dumps_config_states_only_facts_that_fit",
             "tests/hostile/test_round13_lead.py::"
             "test_a_refused_vocabulary_is_no_bound_for_a_kernel_contract",
             "tests/hostile/test_round13_lead.py::"
             "test_the_repro_takes_no_refused_vocabulary_from_the_manifest"],
    "T58b": ["tests/hostile/test_round13_lead.py::"
             "test_a_tensor_shape_whose_product_wraps_is_one_line"],
    "T58c": ["tests/hostile/test_round13_lead.py::"
             "test_known_signatures_are_not_judged_from_the_fix_alone",
             "tests/hostile/test_round13_lead.py::"
             "test_the_writeup_drafts_no_new_issue_from_the_fix_alone"],
    "T58d": ["tests/hostile/test_round13_lead.py::"
             "test_import_set_refuses_a_fact_its_readers_would_refuse",
             "tests/importers/test_import_facts.py::test_bad_set_is_exit_2_with_one_line"],
    "T58e": ["tests/hostile/test_round13_lead.py::"
             "test_the_probes_host_is_read_alike_by_triage_the_conclusion_and_open_many"],
    "T60a": ["tests/hostile/test_round13_audit.py::"
             "test_a_diff_past_its_cap_is_not_read_to_be_named",
             "tests/hostile/test_round13_audit.py::"
             "test_a_diff_within_its_cap_is_still_named_by_its_digest"],
    "T60b": ["tests/hostile/test_round13_audit.py::"
             "test_a_fifo_named_as_a_diff_does_not_block_the_naming"],
    "T57a": ["tests/hostile/test_round13_attack.py::"
             "test_the_histogram_axis_is_not_sized_by_a_records_bound"],
    "T57b": ["tests/hostile/test_round13_attack.py::"
             "test_to_frame_is_linear_in_the_batches"],
    "T57c": ["tests/hostile/test_round13_attack.py::"
             "test_the_plugins_failure_of_a_bad_capture_names_it_inert"],
    "T57d": ["tests/hostile/test_round13_attack.py::"
             "test_a_capture_named_index_gets_a_report_of_its_own"],
    "T61a": ["tests/hostile/test_round13_steps.py::"
             "test_the_timeline_names_the_first_violation_at_its_exact_step",
             "tests/hostile/test_round13_steps.py::test_each_step_gets_its_own_verdict",
             "tests/hostile/test_round13_steps.py::test_the_timeline_labels_are_exact",
             "tests/hostile/test_round13_steps.py::"
             "test_the_timeline_draws_each_step_at_its_own_x_under_its_own_label"],
    "T61b": ["tests/hostile/test_round13_steps.py::test_the_heatmap_labels_are_exact"],
    "T61c": ["tests/hostile/test_round13_steps.py::"
             "test_the_histogram_labels_and_bars_are_exact"],
    "T59a": ["tests/hostile/test_round13_attack_b.py::"
             "test_json_nested_deep_is_refused_alike_by_every_command"],
    "T59b": ["tests/hostile/test_round13_attack_b.py::"
             "test_an_empty_expected_first_finding_is_refused"],
    "T59c": ["tests/hostile/test_round13_attack_b.py::test_json_output_holds_no_lone_surrogate"],
    "T59d": ["tests/hostile/test_round13_attack_b.py::"
             "test_a_group_title_counts_no_unknown_host_as_one_of_its_hosts"],
    "T59e": ["tests/hostile/test_round13_attack_b.py::"
             "test_check_of_the_fix_alone_says_nothing_of_the_crash"],
    "T59f": ["tests/hostile/test_round13_attack_b.py::"
             "test_the_conclusion_of_the_fix_alone_judges_no_crash"],
    "T62a": ["tests/hostile/test_round13_left.py::"
             "test_the_timeline_labels_its_value_axis_exactly"],
    "T62b": ["tests/hostile/test_round13_left.py::"
             "test_a_step_past_the_largest_is_said_to_be_so"],
    "T62c": ["tests/hostile/test_round13_left.py::test_a_bound_not_known_is_said_unknown"],
    "T64a": ["tests/hostile/test_round13_attack_c.py::"
             "test_a_stride_over_one_element_is_read_as_nothing"],
    "T64b": ["tests/hostile/test_round13_attack_c.py::"
             "test_the_text_of_unrecorded_arguments_and_pointer_tables_is_checked",
             "tests/hostile/test_round13_attack_c.py::"
             "test_an_unrecorded_arguments_reason_is_escaped_as_a_value"],
    "T64c": ["tests/hostile/test_round13_attack_c.py::"
             "test_a_masked_rows_slot_is_not_a_broken_contract"],
    "T64d": ["tests/hostile/test_round13_attack_c.py::"
             "test_a_bad_kernel_setting_is_refused_before_the_probe_starts"],
    "T64e": ["tests/hostile/test_round13_attack_c.py::"
             "test_a_load_through_an_empty_tensor_is_its_own"],
    "T63a": ["tests/hostile/test_round13_split.py::"
             "test_a_split_replay_finds_what_the_whole_one_finds",
             "tests/hostile/test_round13_split.py::"
             "test_the_triage_counts_the_same_whatever_its_split",
             "tests/hostile/test_round13_split.py::"
             "test_a_piece_is_judged_by_its_capture_manifest"],
    "T63b": ["tests/hostile/test_round13_split.py::"
             "test_the_race_check_of_a_long_capture_names_the_steps_it_compared",
             "tests/hostile/test_round13_split.py::test_a_race_check_of_every_step_says_no_limit"],
    "T68a": ["tests/hostile/test_round14_lead.py::test_a_marks_data_x_is_its_exact_step"],
    "T68b": ["tests/hostile/test_round14_lead.py::test_ticks_past_2_53_are_round_steps",
             "tests/hostile/test_round14_lead.py::test_round_ticks_are_round_exact_and_within"],
    "T68c": ["tests/hostile/test_round14_lead.py::"
             "test_every_reader_deciding_by_the_runner_reads_it_alike"],
    "T68d": ["tests/hostile/test_round14_lead.py::"
             "test_the_facts_of_a_capture_of_no_records_say_none"],
    "T66a": ["tests/hostile/test_round14_tri14.py::"
             "test_check_states_its_verdict_past_a_folder_at_the_obtained_path",
             "tests/hostile/test_round14_tri14.py::"
             "test_check_json_states_its_verdict_past_a_folder_at_the_obtained_path",
             "tests/hostile/test_round14_tri14.py::"
             "test_check_replaces_a_link_or_fifo_at_the_obtained_path_never_through_it",
             "tests/hostile/test_round14_tri14.py::"
             "test_check_accept_says_what_it_wrote_past_a_folder_at_the_obtained_path"],
    "T66b": ["tests/hostile/test_round14_tri14.py::"
             "test_a_known_issue_is_not_matched_on_the_fix_alone",
             "tests/hostile/test_round14_tri14.py::"
             "test_a_signature_never_rests_on_a_fix_that_is_the_baseline",
             "tests/hostile/test_round14_tri14.py::"
             "test_a_crash_is_not_explained_by_a_fix_that_is_the_baseline"],
    "T66c": ["tests/hostile/test_round14_tri14.py::"
             "test_a_split_capture_has_its_race_window_worked_out_once_when_planned",
             "tests/hostile/test_round14_tri14.py::"
             "test_a_piece_handed_its_window_never_works_it_out_and_finds_the_same",
             "tests/hostile/test_round14_tri14.py::"
             "test_the_planned_window_crosses_to_the_local_worker_process",
             "tests/hostile/test_round14_tri14.py::"
             "test_the_planned_window_crosses_to_a_ray_worker"],
    "T65a": ["tests/hostile/test_round14_kern14.py::"
             "test_a_null_access_of_two_empty_tensors_is_attributed_to_none",
             "tests/hostile/test_round14_kern14.py::"
             "test_a_null_access_without_an_empty_tensor_is_attributed_to_none"],
    "T65b": ["tests/hostile/test_round14_kern14.py::"
             "test_an_address_outside_every_allocation_is_attributed_to_none",
             "tests/hostile/test_round14_kern14.py::"
             "test_a_pointer_far_from_a_live_address_is_not_replayable"],
    "T65c": ["tests/hostile/test_round14_kern14.py::"
             "test_a_grid_all_out_of_bounds_lists_a_bounded_answer"],
    "T65d": ["tests/hostile/test_round14_kern14.py::"
             "test_a_masked_requests_positions_are_not_judged_by_the_block_table",
             "tests/kernels/test_kernel_sanitizer.py::"
             "test_a_masked_requests_positions_read_no_block_table_row"],
    "T65e": ["tests/hostile/test_round14_kern14.py::"
             "test_two_views_of_one_storage_are_not_judged_against_live"],
    "T67a": ["tests/hostile/test_round14_attack.py::test_a_rank_no_segment_name_holds_is_refused",
             "tests/hostile/test_round14_attack.py::test_the_largest_rank_a_name_holds_is_read_back"],
    "T67b": ["tests/hostile/test_round14_attack.py::"
             "test_a_capture_written_by_a_command_is_private"],
    "T67c": ["tests/hostile/test_round14_attack.py::"
             "test_a_site_named_so_no_segment_name_holds_it_is_refused",
             "tests/hostile/test_round14_attack.py::"
             "test_every_site_name_a_declaration_allows_is_one_a_reader_parses"],
    "T67d": ["tests/hostile/test_round14_attack.py::"
             "test_to_arrow_of_a_uint64_tensor_past_int64_is_one_line"],
    "T67e": ["tests/hostile/test_round14_attack.py::"
             "test_an_npz_string_array_of_two_dimensions_is_refused"],
    "T67f": ["tests/hostile/test_round14_attack.py::"
             "test_a_crash_dump_number_past_int64_is_refused_not_dropped",
             "tests/hostile/test_round14_attack.py::"
             "test_a_scheduler_output_of_more_draft_ids_than_kept_is_refused",
             "tests/hostile/test_round14_attack.py::test_a_crash_dump_of_int64_numbers_is_read_whole"],
    "T70a": ["tests/hostile/test_round14_kern14b.py::"
             "test_a_far_access_of_a_v2_kernel_is_attributed_to_no_buffer",
             "tests/hostile/test_round14_kern14b.py::test_both_workers_attribute_an_address_alike",
             "tests/kernels/test_bounds.py::"
             "test_an_address_is_attributed_to_the_nearest_storage_within_reach_or_to_none"],
    "T70b": ["tests/hostile/test_round14_kern14b.py::"
             "test_a_null_access_of_two_empty_v2_buffers_is_attributed_to_no_buffer",
             "tests/hostile/test_round14_kern14b.py::test_both_workers_attribute_an_address_alike",
             "tests/kernels/test_bounds.py::test_a_null_pointer_is_the_one_empty_tensors_or_none"],
    "T69a": ["tests/hostile/test_round14_attack_b.py::"
             "test_a_probes_events_past_a_readers_caps_keep_the_capture_readable",
             "tests/hostile/test_round14_attack_b.py::"
             "test_a_capture_written_again_past_the_caps_is_one_line",
             "tests/hostile/test_round14_attack_b.py::"
             "test_a_reopened_events_file_counts_what_it_holds"],
    "T69b": ["tests/hostile/test_round14_attack_b.py::"
             "test_a_diff_changed_after_it_was_named_is_refused"],
    "T69c": ["tests/hostile/test_round14_attack_b.py::"
             "test_a_capture_replaced_after_the_triage_cut_it_is_its_error_row",
             "tests/hostile/test_round14_attack_b.py::"
             "test_a_capture_still_written_after_the_triage_cut_it_is_its_error_row"],
    "T69d": ["tests/hostile/test_round14_attack_b.py::"
             "test_the_writer_process_runs_no_module_planted_where_the_engine_runs"],
    "T69e": ["tests/hostile/test_round14_attack_b.py::"
             "test_a_triage_run_in_a_shared_folder_runs_no_module_planted_there"],
    "T69f": ["tests/hostile/test_round14_attack_b.py::"
             "test_a_relative_capture_directory_is_one_capture_wherever_a_process_runs"],
    "T71a": ["tests/hostile/test_round14_fix14.py::"
             "test_a_crash_dump_line_past_the_line_bound_is_said_cut_not_counted",
             "tests/hostile/test_round14_fix14.py::"
             "test_a_crash_dump_line_within_the_bound_is_read_whole",
             "tests/hostile/test_round14_fix14.py::"
             "test_the_import_says_in_one_line_that_a_line_was_cut"],
    "T71b": ["tests/hostile/test_round14_fix14.py::"
             "test_iter_lines_says_which_lines_it_cut",
             "tests/hostile/test_guarded.py::test_iter_lines_equals_a_plain_split",
             "tests/hostile/test_round14_fix14.py::"
             "test_a_cut_probe_line_is_refused",
             "tests/hostile/test_round14_fix14.py::"
             "test_a_crash_event_of_a_cut_line_says_so",
             "tests/hostile/test_round14_fix14.py::"
             "test_a_cut_config_line_keeps_no_number_the_cut_may_have_shortened"],
    "T71c": ["tests/hostile/test_round14_fix14.py::"
             "test_inspect_lists_the_records_of_a_site_not_installed",
             "tests/hostile/test_round14_fix14.py::"
             "test_replay_says_the_records_of_a_site_not_installed_were_not_judged",
             "tests/hostile/test_round14_fix14.py::"
             "test_a_capture_of_known_sites_names_no_site_not_known"],
    "T71d": ["tests/hostile/test_round14_fix14.py::"
             "test_markdown_leaves_no_mention_or_reference_and_renders_the_text",
             "tests/hostile/test_round14_fix14.py::"
             "test_every_markdown_output_leaves_no_mention_or_reference",
             "tests/hostile/test_round14_fix14.py::"
             "test_an_at_after_a_word_is_no_mention_and_stays_as_it_is"],
    "T72a": ["tests/hostile/test_round14_attack_c.py::"
             "test_a_repro_number_past_int64_is_the_data_files_fault_in_one_line",
             "tests/hostile/test_round14_attack_c.py::test_a_repro_number_within_int64_still_decodes"],
    "T72b": ["tests/hostile/test_round14_attack_c.py::"
             "test_a_word_inside_a_user_path_matches_no_known_issue",
             "tests/hostile/test_round14_attack_c.py::"
             "test_an_event_word_stands_as_a_word_or_an_identifiers_part"],
    "T72c": ["tests/hostile/test_round14_attack_c.py::"
             "test_a_summary_records_pid_past_the_token_bound_leaves_with_redaction"],
    "T72d": ["tests/hostile/test_round14_attack_c.py::"
             "test_a_first_finding_key_no_finding_holds_is_refused"],
    "T72e": ["tests/hostile/test_round14_attack_c.py::"
             "test_the_report_of_a_crash_dump_alone_states_the_crash_and_its_known_issues"],
    "T72f": ["tests/hostile/test_round14_attack_c.py::"
             "test_redaction_keeps_every_finding_of_a_clamped_placeholder",
             "tests/hostile/test_round14_attack_c.py::test_the_token_table_keeps_0_and_cycles_the_rest"],
    "T73a": ["tests/hostile/test_round14_fix14b.py::"
             "test_check_says_the_records_of_a_site_not_installed_were_not_judged",
             "tests/hostile/test_round14_fix14b.py::"
             "test_check_of_known_sites_still_matches",
             "tests/hostile/test_round14_fix14b.py::"
             "test_the_pytest_plugin_fails_a_capture_whose_records_were_not_judged",
             "tests/hostile/test_round14_fix14b.py::"
             "test_triage_says_the_records_of_a_site_not_installed_were_not_judged",
             "tests/hostile/test_round14_fix14b.py::"
             "test_triage_of_known_sites_names_nothing_not_judged"],
    "T73b": ["tests/hostile/test_round14_fix14b.py::"
             "test_a_diff_edited_while_a_shrink_runs_is_refused",
             "tests/hostile/test_round14_fix14b.py::"
             "test_a_diff_left_alone_shrinks_named_by_its_digest"],
    "T73c": ["tests/hostile/test_round14_fix14b.py::"
             "test_a_capture_replaced_before_the_stitch_is_its_error_row",
             "tests/hostile/test_round14_fix14b.py::"
             "test_an_engine_left_alone_is_still_stitched",
             "tests/hostile/test_round14_fix14b.py::"
             "test_a_piece_reading_other_files_than_its_sibling_is_its_error_row"],
    "T73d": ["tests/hostile/test_round14_fix14b.py::"
             "test_a_capture_named_outside_the_directory_is_refused",
             "tests/hostile/test_round14_fix14b.py::"
             "test_the_plugin_refuses_it_before_making_anything",
             "tests/hostile/test_round14_fix14b.py::"
             "test_a_capture_in_the_directory_or_with_its_owner_is_kept"],
    "T74a": ["tests/hostile/test_round14_fix14c.py::"
             "test_a_negative_embedding_row_count_is_the_data_files_fault",
             "tests/hostile/test_round14_fix14c.py::"
             "test_an_empty_weight_is_a_bound_the_capture_holds",
             "tests/hostile/test_round14_fix14c.py::"
             "test_the_repro_and_the_reader_refuse_the_same_ints",
             "tests/hostile/test_round14_fix14c.py::"
             "test_a_stored_record_outside_its_range_is_refused_when_read"],
    "T74b": ["tests/hostile/test_round14_fix14c.py::"
             "test_a_forged_huge_number_is_printed_cut",
             "tests/hostile/test_round14_fix14c.py::"
             "test_a_findings_number_is_an_int64",
             "tests/hostile/test_round14_fix14c.py::"
             "test_a_number_up_to_max_digits_prints_in_full"],
    "T78b": ["tests/hostile/test_round15_lead.py::"
             "test_a_far_steps_data_x_is_exact_and_no_drawn_float_poses_as_a_step"],
    "T78c": ["tests/hostile/test_round15_lead.py::"
             "test_a_manifest_written_first_without_the_model_is_completed_by_the_engines"],
    "T78d": ["tests/hostile/test_round15_lead.py::"
             "test_a_crash_dump_alone_is_not_said_to_hold_values_in_range"],
    "T78a": ["tests/hostile/test_round15_lead.py::"
             "test_a_capture_without_its_vllm_version_says_it_is_unknown",
             "tests/hostile/test_round15_lead.py::"
             "test_a_capture_of_the_models_version_says_nothing_of_it"],
    "T74c": ["tests/hostile/test_round14_fix14c.py::"
             "test_a_summary_records_counts_and_line_stay_as_they_are",
             "tests/hostile/test_round14_fix14c.py::"
             "test_a_redacted_summary_replays_to_the_same_findings",
             "tests/hostile/test_round14_fix14c.py::"
             "test_min_and_max_of_a_tensor_of_no_ids_are_no_ids"],
    "T77a": ["tests/hostile/test_round15_attack15.py::"
             "test_one_long_request_id_pads_no_other_row_of_the_findings_table",
             "tests/hostile/test_round15_attack15.py::"
             "test_the_findings_table_still_lines_up_and_escapes"],
    "T77b": ["tests/hostile/test_round15_attack15.py::"
             "test_a_report_of_only_such_records_does_not_say_it_holds_none",
             "tests/hostile/test_round15_attack15.py::"
             "test_a_reports_header_says_which_records_no_variant_judged",
             "tests/hostile/test_round15_attack15.py::"
             "test_findings_says_which_records_no_variant_judged",
             "tests/hostile/test_round15_attack15.py::"
             "test_findings_of_known_sites_only_names_no_record_not_judged"],
    "T77c": ["tests/hostile/test_round15_attack15.py::"
             "test_a_kernel_the_probe_saw_launched_is_never_said_never_launched"],
    "T77d": ["tests/hostile/test_round15_attack15.py::test_a_capture_named_twice_is_one_item"],
    "T84a": ["tests/hostile/test_round16_fix16b.py::"
             "test_another_user_cannot_swap_the_temporary_file_for_a_link",
             "tests/hostile/test_round16_fix16b.py::test_a_failed_write_leaves_nothing_behind",
             "tests/hostile/test_round16_fix16b.py::"
             "test_the_private_folder_is_private_and_named_for_its_output",
             "tests/hostile/test_round16_fix16b.py::"
             "test_a_folder_put_in_place_of_the_private_one_is_refused"],
    "T84b": ["tests/hostile/test_round16_fix16b.py::"
             "test_an_address_in_markdown_is_a_code_span_and_renders_as_the_text",
             "tests/hostile/test_round16_fix16b.py::"
             "test_a_summary_of_a_capture_holding_addresses_links_none",
             "tests/hostile/test_round16_fix16b.py::test_what_gfm_links_not_is_left_as_it_was",
             "tests/hostile/test_round16_fix16b.py::"
             "test_markdown_stays_linear_in_address_like_text"],
    "T84c": ["tests/hostile/test_round16_fix16b.py::"
             "test_a_forged_copy_of_a_rank_makes_no_row_clean",
             "tests/hostile/test_round16_fix16b.py::"
             "test_the_triage_table_shows_the_rank_not_judged",
             "tests/hostile/test_round16_fix16b.py::"
             "test_a_rank_claimed_once_is_compared_as_before"],
    "T84d": ["tests/hostile/test_round16_fix16b.py::"
             "test_a_segment_cut_between_the_check_and_the_read_is_its_error_row",
             "tests/hostile/test_round16_fix16b.py::"
             "test_a_batch_cut_while_it_is_read_is_one_line_naming_the_segment",
             "tests/hostile/test_round16_fix16b.py::"
             "test_a_segment_replaced_before_its_batch_is_read_is_refused",
             "tests/hostile/test_round16_fix16b.py::test_a_batch_read_is_the_batch_mapped",
             "tests/hostile/test_round16_fix16b.py::test_a_batch_past_the_read_cap_is_refused"],
    "T92a": ["tests/hostile/test_round17_fix17.py::test_a_segment_cut_under_a_command_is_one_line",
             "tests/hostile/test_round5_leftovers.py::"
             "test_a_capture_of_more_segments_than_can_be_mapped_is_refused_up_front",
             "tests/hostile/test_round5_leftovers.py::"
             "test_a_map_refused_for_want_of_memory_names_the_map_count"],
    "T92b": ["tests/hostile/test_round17_fix17.py::"
             "test_a_segment_cut_under_a_triage_worker_is_its_row"],
    "T92c": ["tests/hostile/test_round17_fix17.py::"
             "test_an_index_entry_stretched_over_a_hole_is_refused_before_the_hole_is_read",
             "tests/hostile/test_round4_store.py::"
             "test_a_scanned_batch_over_a_hole_is_refused_before_its_columns_are_read",
             "tests/hostile/test_round17_attack17b.py::"
             "test_copied_segments_stretched_over_a_hole_are_not_read_whole"],
    "T95a": ["tests/hostile/test_round17_attack17b.py::"
             "test_a_header_claimed_over_a_hole_is_refused_before_it_is_read",
             "tests/hostile/test_round17_attack17b.py::"
             "test_a_header_past_the_read_cap_is_refused_before_it_is_read"],
    "T95b": ["tests/hostile/test_round17_attack17b.py::"
             "test_a_batch_head_rewritten_after_open_is_refused_before_its_header_is_read"],
    "T95c": ["tests/hostile/test_round17_attack17b.py::"
             "test_ranks_of_several_calls_at_a_step_are_compared_call_by_call"],
    "T95d": ["tests/hostile/test_round17_attack17b.py::"
             "test_a_shrink_whose_manifest_would_be_unreadable_says_so",
             "tests/hostile/test_round17_attack17b.py::"
             "test_a_manifest_its_readers_would_refuse_is_not_written",
             "tests/hostile/test_round17_attack17b.py::"
             "test_events_written_again_past_the_readers_caps_name_no_temporary_file"],
    "T95e": ["tests/hostile/test_round17_attack17b.py::"
             "test_a_divergence_in_a_two_dimensional_tensor_names_its_row_and_column"],
    "T95f": ["tests/hostile/test_round17_attack17b.py::"
             "test_the_records_of_a_site_not_installed_are_counted_as_their_batches_hold",
             "tests/hostile/test_round17_attack17b.py::"
             "test_redact_says_it_dropped_the_records_of_a_site_not_installed"],
    "T77e": ["tests/hostile/test_round15_attack15.py::"
             "test_a_url_in_markdown_is_a_code_span_and_renders_as_the_text",
             "tests/hostile/test_round15_attack15.py::"
             "test_a_summary_of_a_capture_holding_urls_links_nothing"],
    "T77f": ["tests/hostile/test_round15_attack15.py::"
             "test_the_summary_of_a_capture_of_no_records_says_nothing_was_judged",
             "tests/hostile/test_round15_attack15.py::"
             "test_a_capture_of_kernel_launches_only_is_not_said_to_be_a_probe_that_saw_no_call"],
    "T75a": ["tests/hostile/test_round15_kern15.py::"
             "test_views_of_one_storage_are_recorded_and_replayed_as_one",
             "tests/hostile/test_round15_kern15.py::"
             "test_an_impossible_sharing_is_refused_in_one_line"],
    "T75b": ["tests/hostile/test_round15_kern15.py::"
             "test_storages_that_partly_overlap_are_one_memory",
             "tests/hostile/test_round15_kern15.py::"
             "test_an_access_across_overlapping_storages_is_inside"],
    "T75c": ["tests/hostile/test_round15_kern15.py::"
             "test_a_null_access_through_a_numpy_made_empty_v2_buffer_is_its",
             "tests/hostile/test_round15_kern15.py::"
             "test_both_workers_take_a_zero_pointer_for_an_empty_tensor"],
    "T75d": ["tests/hostile/test_round15_kern15.py::"
             "test_the_block_contract_judges_what_the_kernel_reads_under_context_parallelism",
             "tests/hostile/test_round15_kern15.py::"
             "test_the_block_contract_is_not_judged_where_the_masking_is_unknown"],
    "T80a": ["tests/hostile/test_round15_fix15b.py::"
             "test_a_file_changed_between_the_pieces_and_the_stitch_is_its_error_row",
             "tests/hostile/test_round15_fix15b.py::"
             "test_a_file_changed_while_its_piece_reads_it_is_its_error_row",
             "tests/hostile/test_round15_fix15b.py::"
             "test_a_capture_whose_files_are_left_alone_is_no_error_row"],
    "T80b": ["tests/hostile/test_round15_fix15b.py::"
             "test_a_segment_cut_or_rewritten_under_the_stitch_is_its_error_row"],
    "T80c": ["tests/hostile/test_round15_fix15b.py::"
             "test_a_ray_the_caller_started_in_a_planted_folder_is_refused"],
    "T80d": ["tests/hostile/test_round15_fix15b.py::"
             "test_elements_unlike_the_memory_they_share_are_refused_in_one_line",
             "tests/hostile/test_round15_fix15b.py::"
             "test_elements_like_the_memory_they_share_are_read"],
    "T80e": ["tests/hostile/test_round15_fix15b.py::"
             "test_a_storage_at_no_whole_number_of_elements_is_refused_when_read"],
    "T76a": ["tests/hostile/test_round15_fix15.py::"
             "test_a_segment_rewritten_in_place_before_the_stitch_is_its_error_row",
             "tests/hostile/test_round15_fix15.py::"
             "test_a_segment_rewritten_in_place_while_the_stitch_reads_it_is_its_error_row",
             "tests/hostile/test_round15_fix15.py::"
             "test_a_segment_rewritten_in_place_between_two_pieces_is_its_error_row",
             "tests/hostile/test_round15_fix15.py::"
             "test_a_segment_rewritten_in_place_while_its_piece_reads_it_is_its_error_row",
             "tests/hostile/test_round15_fix15.py::"
             "test_a_capture_left_alone_is_triaged_whole_and_split_alike"],
    "T76b": ["tests/hostile/test_round15_fix15.py::"
             "test_a_ray_worker_runs_no_module_planted_where_the_triage_runs",
             "tests/hostile/test_round14_tri14.py::"
             "test_the_planned_window_crosses_to_a_ray_worker"],
    "T76c": ["tests/hostile/test_round15_fix15.py::"
             "test_the_race_window_on_arrays_is_the_window_of_the_records",
             "tests/hostile/test_round15_fix15.py::"
             "test_the_window_of_a_capture_is_its_records_window",
             "tests/hostile/test_round15_fix15.py::"
             "test_the_race_window_costs_a_fraction_of_a_tuple_a_record"],
    "T76d": ["tests/hostile/test_round15_fix15.py::"
             "test_a_traceback_line_past_the_line_bound_is_said_cut",
             "tests/hostile/test_round15_fix15.py::"
             "test_a_traceback_within_the_line_bound_is_not_said_cut"],
    "T76e": ["tests/hostile/test_round15_fix15.py::"
             "test_the_svg_timeline_breaks_its_lines_where_no_record_is",
             "tests/hostile/test_round15_fix15.py::"
             "test_the_matplotlib_timeline_breaks_its_lines_where_no_record_is",
             "tests/hostile/test_round15_fix15.py::"
             "test_adjacent_steps_are_one_line"],
    "T79a": ["tests/hostile/test_round15_attack15b.py::"
             "test_a_crash_without_findings_is_not_judged_from_the_fix_alone",
             "tests/hostile/test_round15_attack15b.py::"
             "test_known_through_the_fix_alone_names_no_known_issue"],
    "T79b": ["tests/hostile/test_round15_attack15b.py::"
             "test_a_v1_capture_matches_no_v2_known_issue",
             "tests/hostile/test_round15_attack15b.py::"
             "test_the_runner_of_a_capture_is_none_where_its_sites_say_none"],
    "T79c": ["tests/hostile/test_round15_attack15b.py::"
             "test_redact_keeps_a_v2_finding_into_output_bin_counts",
             "tests/hostile/test_round15_attack15b.py::"
             "test_redact_still_names_a_summary_records_dropped_tensor_by_its_default"],
    "T79d": ["tests/hostile/test_round15_attack15b.py::"
             "test_the_async_schedulers_placeholder_drafts_are_no_negative_draft_id"],
    "T81a": ["tests/hostile/test_round15_fix15c.py::"
             "test_an_incident_notebook_refuses_a_capture_not_its_incidents",
             "tests/hostile/test_round15_fix15c.py::"
             "test_a_copy_of_an_incident_capture_is_another_capture",
             "tests/hostile/test_round15_fix15c.py::"
             "test_an_incident_notebook_runs_on_its_own_capture_and_leaves_nothing_in_tmp",
             "tests/hostile/test_round15_fix15c.py::"
             "test_an_incident_notebook_run_outside_report_stops_at_a_capture_not_its_incidents"],
    "T81b": ["tests/hostile/test_round15_fix15c.py::"
             "test_a_value_past_int64_names_the_capture_and_its_segment",
             "tests/hostile/test_round15_fix15c.py::"
             "test_a_value_past_int64_in_one_segment_names_that_segment"],
    "T81c": ["tests/hostile/test_round15_fix15c.py::"
             "test_a_site_of_a_plugin_not_installed_is_said_so_with_its_records",
             "tests/hostile/test_round15_fix15c.py::"
             "test_a_site_neither_installed_nor_held_is_still_unknown",
             "tests/hostile/test_round15_fix15c.py::"
             "test_a_plot_of_a_site_of_a_plugin_not_installed_says_so_through_the_api"],
    "T81d": ["tests/hostile/test_round15_fix15c.py::"
             "test_the_probe_lists_as_graph_only_a_kernel_launched_only_in_a_graph_capture",
             "tests/hostile/test_round15_fix15c.py::"
             "test_coverage_says_graph_only_of_a_kernel_launched_only_in_a_graph_capture",
             "tests/hostile/test_round15_fix15c.py::"
             "test_coverage_of_an_older_probes_graph_only_does_not_say_only"],
    "T81e": ["tests/hostile/test_round15_fix15c.py::"
             "test_coverage_counts_a_process_summaries_once"],
    "T82a": ["tests/hostile/test_round15_attack15c.py::"
             "test_the_nesting_check_is_linear_in_an_unclosed_string",
             "tests/hostile/test_round15_attack15c.py::"
             "test_a_manifest_of_an_unclosed_string_is_one_row_of_a_triage"],
    "T82b": ["tests/hostile/test_round15_attack15c.py::"
             "test_a_capture_through_a_link_and_dotdot_is_a_row_of_its_own",
             "tests/hostile/test_round15_attack15c.py::"
             "test_a_capture_through_a_link_and_dotdot_names_its_own_folder",
             "tests/hostile/test_round15_attack15c.py::"
             "test_a_capture_named_directly_keeps_its_name"],
    "T82c": ["tests/hostile/test_round15_attack15c.py::"
             "test_captures_past_path_max_are_stitched_not_said_changed",
             "tests/hostile/test_round15_attack15c.py::"
             "test_a_path_within_path_max_is_opened_as_it_is"],
    "T82d": ["tests/hostile/test_round15_attack15c.py::"
             "test_the_html_report_of_a_capture_past_path_max_is_written"],
    "T86a": ["tests/hostile/test_round16_lead.py::"
             "test_the_sinks_table_is_one_row_per_group_not_per_id"],
    "T86b": ["tests/hostile/test_round16_lead.py::"
             "test_a_signatures_finding_is_the_first_row_that_matches"],
    "T86c": ["tests/hostile/test_round16_lead.py::"
             "test_a_styled_tables_markup_is_a_few_bytes_per_cell"],
    "T86d": ["tests/hostile/test_round16_lead.py::"
             "test_findings_past_the_budget_are_refused_in_one_line"],
    "T86e": ["tests/hostile/test_round16_lead.py::"
             "test_entries_named_capture_that_are_none_are_rows_not_dropped"],
    "T86f": ["tests/hostile/test_round8_attack.py::"
             "test_a_crash_verdict_not_computed_is_no_difference",
             "tests/test_share_cli.py::"
             "test_one_evidence_type_serialises_as_expected_json_and_differs_on_its_own_keys"],
    "T86g": ["tests/hostile/test_round16_lead.py::"
             "test_a_request_id_that_is_vllms_word_leaves_that_word_in_the_error_text"],
    "T89a": ["tests/hostile/test_round16_attack16c.py::"
             "test_a_selection_naming_no_installed_kernel_is_refused",
             "tests/hostile/test_round16_attack16c.py::test_all_is_all_in_any_case",
             "tests/hostile/test_round16_attack16c.py::"
             "test_a_module_qualified_name_as_coverage_lists_it_records_that_kernel"],
    "T89b": ["tests/hostile/test_round16_attack16c.py::"
             "test_a_summary_counting_graph_launches_no_probe_counts_is_refused",
             "tests/hostile/test_round16_attack16c.py::"
             "test_a_summary_of_counts_a_probe_writes_is_read"],
    "T89c": ["tests/hostile/test_round16_attack16c.py::"
             "test_a_parameter_recorded_twice_is_refused"],
    "T89d": ["tests/hostile/test_round16_attack16c.py::"
             "test_combine_tokens_writes_are_held_to_the_budget_before_they_are_planned",
             "tests/hostile/test_round16_attack16c.py::"
             "test_combine_tokens_of_a_few_writes_is_replayed"],
    "T89e": ["tests/hostile/test_round16_attack16c.py::"
             "test_post_update_reads_are_held_to_the_budget_before_they_are_planned",
             "tests/hostile/test_round16_attack16c.py::"
             "test_post_update_of_a_few_reads_is_replayed"],
    "T89f": ["tests/hostile/test_round16_attack16c.py::"
             "test_a_finding_of_a_replay_on_zeros_says_whether_live_made_it_is_unknown"],
    "T91a": ["tests/hostile/test_round16_attack16d.py::"
             "test_redact_drops_ids_an_event_or_the_manifest_holds_under_a_field_name",
             "tests/hostile/test_round16_attack16d.py::"
             "test_redact_of_a_capture_without_token_ids_says_it_permuted_none"],
    "T91b": ["tests/hostile/test_round16_attack16d.py::"
             "test_the_repro_says_no_element_outside_its_bound_that_the_record_does_not_hold_so"],
    "T91c": ["tests/hostile/test_round16_attack16d.py::"
             "test_the_write_up_of_a_capture_of_no_records_says_nothing_was_judged",
             "tests/hostile/test_round16_attack16d.py::"
             "test_the_draft_of_a_capture_without_a_crash_event_lists_none",
             "tests/hostile/test_round16_attack16d.py::"
             "test_the_write_up_says_none_found_only_in_the_records_judged"],
    "T91d": ["tests/hostile/test_round16_attack16d.py::"
             "test_the_write_up_offers_no_reproducer_where_repro_has_nothing_to_write"],
    "T98a": ["tests/hostile/test_round17_lead.py::"
             "test_a_check_of_launches_says_it_did_not_check_them",
             "tests/hostile/test_round17_lead.py::"
             "test_the_plugins_pass_of_launches_warns_that_they_were_not_checked"],
    "T99a": ["tests/hostile/test_round17_attack17e.py::"
             "test_triage_row_names_the_earliest_crash_event_of_a_kind"],
    "T99b": ["tests/hostile/test_round17_attack17e.py::"
             "test_a_clamped_placeholder_explains_no_crash"],
    "T98b": ["tests/hostile/test_round17_lead.py::"
             "test_a_bad_launch_is_named_by_its_events_file_and_line"],
    "T98c": ["tests/hostile/test_round17_lead.py::"
             "test_a_full_disk_as_a_process_joins_keeps_the_folder_and_says_so"],
    "T98d": ["tests/hostile/test_round17_lead.py::"
             "test_the_writer_processs_command_line_holds_no_manifest"],
    "T98e": ["tests/hostile/test_round17_lead.py::"
             "test_a_dead_process_is_said_to_stop_at_its_own_last_step"],
    "T98f": ["tests/hostile/test_round17_lead.py::"
             "test_records_of_batches_spanning_every_step_are_held_as_the_same_records_in_order",
             "tests/hostile/test_round17_lead.py::"
             "test_records_read_in_pipeline_order_are_those_read_one_by_one"],
    "T98g": ["tests/hostile/test_round17_lead.py::"
             "test_triage_names_the_runner_the_recorded_sites_show_as_known_does"],
    "T98h": ["tests/hostile/test_round17_lead.py::"
             "test_a_forked_copy_writes_none_of_its_parents_launches"],
    "T101a": ["tests/hostile/test_round18_attack18a.py::"
              "test_a_diff_no_v1_site_runs_is_refused_not_judged_as_the_installed_code",
              "tests/hostile/test_round18_attack18a.py::"
              "test_a_model_runner_v2_diff_is_refused_on_a_v1_capture_and_runs_on_its_own"],
    "T101b": ["tests/hostile/test_round18_attack18a.py::"
              "test_a_helper_the_patched_module_imports_from_a_file_the_diff_changes_is_named",
              "tests/hostile/test_round18_attack18a.py::"
              "test_the_imports_of_a_module_are_named_with_relative_ones_resolved"],
    "T101c": ["tests/hostile/test_round18_attack18a.py::"
              "test_the_findings_a_diff_cannot_see_are_counted_of_the_baselines_own"],
    "T101d": ["tests/hostile/test_round18_attack18a.py::"
              "test_a_v1_embeddings_repro_says_a_fix_of_the_writer_does_not_pass_it"],
    "T101e": ["tests/hostile/test_round18_attack18a.py::"
              "test_the_variant_vllm_plus_nothing_names_no_diff_file"],
    "T105a": ["tests/hostile/test_round18_fix18b.py::"
              "test_an_embedding_only_capture_under_a_diff_it_does_not_run_is_refused",
              "tests/hostile/test_round18_fix18b.py::"
              "test_a_v2_capture_under_the_v2_guard_still_runs"],
    "T105b": ["tests/hostile/test_round18_fix18b.py::"
              "test_the_replay_line_says_which_files_of_the_diff_ran",
              "tests/hostile/test_round18_fix18b.py::"
              "test_no_v1_sites_call_reaches_a_function_of_another_patched_module"],
    "T105c": ["tests/hostile/test_round18_fix18b.py::"
              "test_one_diff_at_two_paths_is_named_as_one_diff_given_twice",
              "tests/hostile/test_round18_fix18b.py::"
              "test_two_diffs_of_one_name_and_one_diff_under_two_names_still_run"],
    "T106a": ["tests/hostile/test_round18_fix18c.py::"
              "test_a_diff_of_the_embeddings_module_loads_and_runs"],
    "T106b": ["tests/hostile/test_round18_fix18c.py::"
              "test_a_site_the_diff_leaves_as_installed_is_marked_per_site",
              "tests/hostile/test_round18_fix18c.py::"
              "test_the_sites_of_the_modules_a_diff_changes_are_not_marked"],
    "T103a": ["tests/hostile/test_round18_lead.py::"
              "test_replays_resolved_count_is_not_the_conclusions_resolves",
              "tests/test_replay_cli.py::test_text_says_the_patched_finding_is_resolved"],
    "T103b": ["tests/hostile/test_round18_lead.py::"
              "test_a_batch_past_the_readers_limit_is_written_as_several"],
    "T103c": ["tests/hostile/test_round18_lead.py::"
              "test_the_plugins_pass_says_the_obtained_result_it_could_not_remove"],
    "T111a": ["tests/hostile/test_round19_lead.py::"
              "test_redact_refuses_a_kept_field_the_capture_does_not_hold"],
    "T111b": ["tests/hostile/test_round19_lead.py::"
              "test_findings_says_the_capture_holds_no_record_where_it_was_asked"],
    "T117a": ["tests/hostile/test_round20_lead.py::"
              "test_a_recording_process_says_so_in_its_probe_start",
              "tests/hostile/test_round20_lead.py::"
              "test_a_process_without_the_recorder_names_no_kernels",
              "tests/hostile/test_round20_lead.py::"
              "test_a_kernel_a_killed_recorder_may_have_launched_is_not_said_never_launched",
              "tests/hostile/test_round20_lead.py::"
              "test_processes_that_all_wrote_their_counts_leave_never_launched_as_it_was"],
    "T118a": ["tests/hostile/test_round20_attack20c.py::"
              "test_a_forked_copy_killed_after_it_recorded_is_said_to_have_died"],
    "T118b": ["tests/hostile/test_round20_attack20c.py::"
              "test_a_forked_copys_counts_are_its_own"],
    "T118c": ["tests/hostile/test_round20_attack20c.py::"
              "test_a_forked_copy_with_the_writer_thread_writes_files_of_its_own"],
    "T118d": ["tests/hostile/test_round20_attack20c.py::"
              "test_a_forked_copy_names_its_recorder_in_its_probe_start"],
    "T118e": ["tests/hostile/test_round20_attack20c.py::"
              "test_a_killed_recorder_sharing_a_pid_with_another_hosts_is_not_counted",
              "tests/hostile/test_round20_attack20c.py::"
              "test_two_hosts_processes_of_one_pid_and_rank_count_apart"],
    "T118f": ["tests/hostile/test_round20_attack20c.py::"
              "test_embedding_guards_capture_under_the_home_folder",
              "tests/hostile/test_round20_attack20c.py::"
              "test_embedding_guard_writes_into_nothing_that_exists"],
    "T118g": ["tests/hostile/test_round20_attack20c.py::"
              "test_embedding_guards_bounds_error_is_not_hidden_by_a_failed_close"],
    "T118h": ["tests/hostile/test_round20_attack20c.py::"
              "test_a_probe_count_in_other_than_ascii_digits_is_refused"],
    "T117b": ["tests/hostile/test_round20_lead.py::"
              "test_steps_a_log_never_named_are_said_to_be_its_lines_order",
              "tests/hostile/test_round20_lead.py::"
              "test_a_log_naming_every_step_says_nothing_of_line_order",
              "tests/hostile/test_round20_lead.py::"
              "test_a_forged_count_of_ordinal_records_is_read_as_none"],
    "T117c": ["tests/hostile/test_round20_lead.py::"
              "test_the_verdict_matrix_says_what_no_variant_judged",
              "tests/hostile/test_round20_lead.py::"
              "test_the_verdict_matrix_of_a_capture_judged_whole_says_nothing_more"],
    "T125a": ["tests/hostile/test_round21_lead.py::"
              "test_the_events_table_says_a_step_the_log_never_said_is_unknown"],
    "T125b": ["tests/hostile/test_round21_lead.py::"
              "test_a_shrunk_capture_says_what_it_was_shrunk_from"],
    "T126a": ["tests/hostile/test_round21_attack21c.py::"
              "test_a_crash_before_every_value_out_of_range_is_not_explained_by_them",
              "tests/hostile/test_round21_attack21c.py::"
              "test_a_crash_at_or_after_the_value_or_of_no_known_step_stays_explained"],
    "T126b": ["tests/hostile/test_round21_attack21c.py::"
              "test_a_shrink_count_fewer_than_the_records_held_is_refused"],
    "T126c": ["tests/hostile/test_round21_attack21c.py::"
              "test_a_clamped_placeholder_run_without_drafts_is_refused"],
    "T125c": ["tests/hostile/test_round21_lead.py::"
              "test_redact_says_what_a_field_it_does_not_name_is"],
    "T125d": ["tests/hostile/test_round21_lead.py::"
              "test_no_match_names_the_signatures_not_judged"],
    "T125e": ["tests/hostile/test_round21_lead.py::"
              "test_the_crash_dumps_drafts_are_gathered_in_linear_time"],
    "T125f": ["tests/hostile/test_round21_lead.py::"
              "test_a_folder_found_in_place_of_the_new_one_keeps_its_mode"],
    "T130a": ["tests/hostile/test_round22_fix22a.py::"
              "test_a_split_piece_past_the_key_cap_reads_its_null_origin_as_unknown",
              "tests/hostile/test_round22_fix22a.py::"
              "test_a_split_piece_whose_origins_were_searched_reads_null_as_none"],
    "T130b": ["tests/hostile/test_round22_fix22a.py::"
              "test_a_split_triage_decodes_each_result_once"],
    "T131a": ["tests/hostile/test_round22_fix22b.py::"
              "test_triage_says_it_cannot_list_a_folder_of_write_and_search",
              "tests/hostile/test_round22_fix22b.py::"
              "test_the_plugin_says_it_cannot_list_a_folder_of_write_and_search",
              "tests/hostile/test_round22_fix22b.py::"
              "test_a_folder_that_cannot_be_listed_beside_captures_is_said",
              "tests/hostile/test_round22_fix22b.py::test_an_empty_or_missing_folder_still_names_no_capture"],
    "T131b": ["tests/hostile/test_round22_fix22b.py::"
              "test_a_shared_output_is_its_owners_to_read_under_umask_0477"],
    "T131c": ["tests/hostile/test_round22_fix22b.py::"
              "test_an_output_in_a_folder_of_write_and_search_is_flushed",
              "tests/hostile/test_round22_fix22b.py::"
              "test_a_capture_in_a_folder_of_write_and_search_is_flushed",
              "tests/hostile/test_round22_fix22b.py::test_a_readable_folder_is_fsynced_as_before"],
    "T131d": ["tests/hostile/test_round22_fix22b.py::test_triage_runs_under_umask_0477"],
    "T131e": ["tests/hostile/test_round22_fix22b.py::test_a_ray_tasks_late_row_says_its_deadline",
              "tests/hostile/test_round22_fix22b.py::"
              "test_a_local_task_no_signal_reaches_says_its_deadline",
              "tests/fleet/test_ray_gather.py::test_a_started_task_past_its_backstop_is_cancelled"],
    "T131f": ["tests/hostile/test_round22_fix22b.py::"
              "test_a_record_a_signal_cuts_out_of_its_hand_off_is_said"],
    "T132a": ["tests/hostile/test_round22_attack22a.py::"
              "test_every_character_drawn_as_nothing_is_its_escape",
              "tests/hostile/test_round22_attack22a.py::"
              "test_a_suggested_command_gives_a_tagged_name_back_whole",
              "tests/hostile/test_round22_attack22a.py::"
              "test_triage_names_a_tagged_capture_apart"],
    "T132b": ["tests/hostile/test_round22_attack22a.py::"
              "test_an_origin_a_later_piece_left_out_is_never_an_older_one"],
    "T132c": ["tests/hostile/test_round22_attack22a.py::test_open_many_refuses_an_empty_path",
              "tests/hostile/test_round22_attack22a.py::test_triage_of_an_empty_path_is_refused"],
    "T132d": ["tests/hostile/test_round22_attack22a.py::"
              "test_a_speculative_method_makes_no_code_span_of_a_markdown_title"],
    "T133a": ["tests/hostile/test_round22_attack22b.py::"
              "test_a_sigterm_held_with_a_sigint_is_handled_when_the_sigints_handler_raises"],
    "T134a": ["tests/hostile/test_round22_attack22c.py::test_a_guard_passed_on_event_is_no_crash",
              "tests/hostile/test_round22_attack22c.py::"
              "test_a_guard_passed_on_event_is_a_failure_to_report",
              "tests/hostile/test_round22_attack22c.py::"
              "test_a_guard_violation_is_still_a_crash_and_redact_keeps_the_passed_on_event"],
    "T134b": ["tests/hostile/test_round22_attack22c.py::"
              "test_the_draft_of_a_capture_of_no_crash_is_not_titled_engine_crash"],
    "T133b": ["tests/hostile/test_round22_attack22b.py::"
              "test_a_sigterms_flush_and_dump_wait_for_an_event_being_framed"],
    "T133c": ["tests/hostile/test_round22_attack22b.py::"
              "test_records_whose_write_failed_are_not_said_lost_to_a_full_ring",
              "tests/hostile/test_round20_fix20a.py::"
              "test_findings_says_the_records_the_probe_never_wrote"],
    "T132e": ["tests/hostile/test_round22_attack22a.py::"
              "test_a_divergence_names_a_backticked_host_as_it_is"],
    "T132f": ["tests/hostile/test_round22_attack22a.py::"
              "test_an_error_row_names_a_backticked_path_as_it_is"],
    "T130c": ["tests/hostile/test_round22_fix22a.py::"
              "test_a_cached_request_id_holding_a_quote_is_read_as_printed",
              "tests/hostile/test_round22_fix22a.py::"
              "test_a_cached_request_list_read_wrong_leaves_the_batch_unknown",
              "tests/hostile/test_round22_fix22a.py::test_a_printed_list_is_read_by_its_quotes",
              "tests/hostile/test_round22_fix22a.py::"
              "test_a_new_request_id_holding_a_comma_leaves_the_batch_unknown"],
    "T130d": ["tests/hostile/test_round22_fix22a.py::"
              "test_known_says_why_a_fact_spelled_twice_is_unknown"],
    "T130e": ["tests/hostile/test_round22_fix22a.py::"
              "test_reports_after_an_engine_dead_event_are_counted_with_it"],
    "T130f": ["tests/hostile/test_round22_fix22a.py::test_save_refuses_a_capture_folder"],
    "T130g": ["tests/hostile/test_round22_fix22a.py::"
              "test_an_unknown_plot_kind_names_the_argument_and_the_choices"],
    "T134c": ["tests/hostile/test_round22_attack22c.py::"
              "test_check_does_not_say_it_replayed_a_variant_expected_json_lacks"],
    "T134d": ["tests/hostile/test_round22_attack22c.py::"
              "test_import_sources_takes_one_source_given_alone"],
    "T134e": ["tests/hostile/test_round22_attack22c.py::"
              "test_an_mtp_method_of_its_models_name_is_mtp"],
    "T134f": ["tests/hostile/test_round22_attack22c.py::"
              "test_why_a_capture_holds_no_record_is_said_of_its_origin"],
    "T125g": ["tests/hostile/test_round22_lead.py::"
              "test_triage_says_an_imported_capture_of_no_record_was_imported"],
    "T125h": ["tests/hostile/test_round22_lead.py::"
              "test_the_report_notebook_does_not_call_every_event_a_crash_line"],
    "T137a": ["tests/hostile/test_round22_fix22d.py::test_the_records_lost_to_a_signal_are_said",
              "tests/hostile/test_round22_fix22d.py::test_inspect_lists_the_records_lost_to_a_signal",
              "tests/hostile/test_round22_fix22d.py::test_a_lost_count_that_is_no_count_is_ignored",
              "tests/hostile/test_round22_fix22d.py::"
              "test_a_lost_count_says_no_more_than_the_records_unaccounted",
              "tests/hostile/test_round22_fix22d.py::test_redact_keeps_the_records_lost_to_a_signal"],
    "T137b": ["tests/hostile/test_round22_fix22d.py::"
              "test_a_frame_a_signal_cuts_is_framed_and_counted_together"],
    "T137c": ["tests/hostile/test_round22_fix22d.py::"
              "test_the_plugin_warns_of_a_folder_it_cannot_list_beside_captures"],
    "T137d": ["tests/hostile/test_round22_fix22d.py::"
              "test_a_writer_says_it_cannot_look_for_old_builds_in_a_folder_it_cannot_list",
              "tests/hostile/test_round22_fix22d.py::"
              "test_a_writer_still_removes_old_builds_in_a_folder_it_can_list"],
    "T137e": ["tests/hostile/test_round22_fix22d.py::test_the_umask_is_read_without_setting_it"],
    "T135a": ["tests/hostile/test_round22_attack22d.py::"
              "test_a_clean_replay_on_zeros_says_the_live_accesses_were_not_judged"],
    "T135b": ["tests/hostile/test_round22_attack22d.py::"
              "test_inspect_says_the_kernel_launches_a_capture_holds"],
    "T135c": ["tests/hostile/test_round22_attack22d.py::"
              "test_a_wide_log_of_text_mostly_not_ascii_is_refused"],
    "T135d": ["tests/hostile/test_round22_attack22d.py::"
              "test_wide_text_appended_to_a_utf8_log_is_refused"],
    "T136b": ["tests/hostile/test_round22_fix22c.py::"
              "test_the_api_refuses_an_empty_path_in_one_line",
              "tests/hostile/test_round22_fix22c.py::"
              "test_the_cli_refuses_an_empty_path_in_one_line"],
    "T136c": ["tests/hostile/test_round22_fix22c.py::"
              "test_a_rerun_replays_at_most_its_own_steps_of_origins"],
    "T136d": ["tests/hostile/test_round22_fix22c.py::"
              "test_a_sigterm_as_the_capture_is_made_keeps_the_event_and_probe_stop"],
    "T125i": ["tests/hostile/test_round22_lead.py::"
              "test_the_paragraph_of_a_capture_of_no_record_says_no_record_was_judged"],
    "T125j": ["tests/hostile/test_round22_lead.py::"
              "test_redact_says_the_numbers_of_kept_event_text_are_not_permuted"],
    "T138a": ["tests/hostile/test_round23_fix23a.py::"
              "test_redact_keeps_the_guards_tensor_names_and_words_and_scrubs_hosts_and_paths"],
    "T138b": ["tests/hostile/test_round23_fix23a.py::"
              "test_the_draft_title_says_what_a_guard_event_claims_beside_the_records"],
    "T138c": ["tests/hostile/test_round23_fix23a.py::"
              "test_every_line_reporting_a_death_is_counted_as_lines",
              "tests/hostile/test_round19_attack19b.py::test_the_reports_of_one_death_are_one_crash"],
    "T138d": ["tests/hostile/test_round23_fix23a.py::"
              "test_a_known_issue_a_piece_could_not_judge_is_named_in_every_output",
              "tests/hostile/test_round23_fix23a.py::"
              "test_pieces_whose_origins_were_all_searched_name_none_not_judged"],
    "T143a": ["tests/hostile/test_round23_lead.py::"
              "test_one_far_step_does_not_put_every_record_in_one_piece",
              "tests/hostile/test_round23_lead.py::"
              "test_a_piece_reruns_no_more_origins_than_it_holds_steps",
              "tests/hostile/test_round23_lead.py::test_a_step_is_never_cut"],
    "T139a": ["tests/hostile/test_round23_fix23b.py::"
              "test_the_byte_order_of_appended_wide_text_is_named_or_said_unknown"],
    "T139b": ["tests/hostile/test_round23_fix23b.py::"
              "test_a_launch_path_other_than_compiled_or_interpreter_is_refused"],
    "T139c": ["tests/hostile/test_round23_fix23b.py::test_a_bool_for_an_int_parameter_is_refused",
              "tests/hostile/test_round23_fix23b.py::test_the_plain_int_helper_refuses_bools"],
    "T139d": ["tests/hostile/test_round23_fix23b.py::"
              "test_a_tensor_file_of_no_record_is_refused_in_one_line"],
    "T139e": ["tests/hostile/test_round23_fix23b.py::"
              "test_two_threads_lifting_the_umask_leave_it_as_they_found_it"],
    "T141a": ["tests/hostile/test_round23_attack23b.py::"
              "test_a_sigint_as_a_holds_handlers_are_put_back_leaves_none_replaced"],
    "T141b": ["tests/hostile/test_round23_attack23b.py::"
              "test_a_record_the_ring_drops_as_a_handler_raises_is_counted"],
    "T141c": ["tests/hostile/test_round23_attack23b.py::"
              "test_a_signal_as_the_close_begins_waits_for_its_probe_stop"],
    "T141d": ["tests/hostile/test_round23_attack23b.py::"
              "test_a_forked_copy_never_counts_its_parents_records_lost_to_a_signal"],
    "T141e": ["tests/hostile/test_round23_attack23b.py::"
              "test_a_copy_forked_as_its_parent_closes_keeps_its_own_records"],
    "T141f": ["tests/hostile/test_round23_attack23b.py::"
              "test_a_copy_ending_before_its_parents_first_write_leaves_its_folder"],
    "T141g": ["tests/hostile/test_round23_attack23b.py::"
              "test_a_forked_copy_keeps_its_folder_when_the_first_process_ends_first"],
    "T142a": ["tests/hostile/test_round23_attack23c.py::"
              "test_a_replay_of_summary_records_alone_is_not_said_to_raise_nothing"],
    "T142b": ["tests/hostile/test_round23_attack23c.py::"
              "test_the_histogram_draws_no_value_a_variant_resolves_or_cannot_judge_as_out_of_bounds"],
    "T142c": ["tests/hostile/test_round23_attack23c.py::"
              "test_the_draft_of_a_capture_whose_engine_died_says_it_died"],
    "T142d": ["tests/hostile/test_round23_attack23c.py::"
              "test_redact_names_and_keeps_simulate_s_own_fields"],
    "T142e": ["tests/hostile/test_round23_attack23c.py::"
              "test_a_summary_record_whose_min_is_above_its_max_is_judged_on_both"],
    "T142f": ["tests/hostile/test_round23_attack23c.py::"
              "test_a_record_cut_by_a_deadline_is_not_said_to_raise"],
    "T142g": ["tests/hostile/test_round23_attack23c.py::"
              "test_a_summary_record_holding_its_site_s_values_is_refused"],
    "T142h": ["tests/hostile/test_round23_attack23c.py::"
              "test_values_of_summary_records_are_not_said_to_be_reads_inside_an_allocation"],
    "T142i": ["tests/hostile/test_round23_attack23c.py::"
              "test_a_dump_s_summary_records_are_not_called_a_log_s"],
    "T142j": ["tests/hostile/test_round23_attack23c.py::"
              "test_a_known_issue_is_not_matched_on_a_value_the_variant_cannot_judge"],
    "T140a": ["tests/hostile/test_round23_attack23a.py::test_simulate_refuses_an_empty_output",
              "tests/hostile/test_round23_attack23a.py::test_the_api_simulate_refuses_an_empty_output"],
    "T140b": ["tests/hostile/test_round23_attack23a.py::test_triage_refuses_an_empty_output",
              "tests/hostile/test_round23_attack23a.py::test_findings_refuses_an_empty_output"],
    "T140c": ["tests/hostile/test_round23_attack23a.py::"
              "test_the_pytest_plugin_refuses_an_empty_root"],
    "T140d": ["tests/hostile/test_round23_attack23a.py::"
              "test_two_workers_tracebacks_interleaved_are_two_crashes",
              "tests/hostile/test_round23_attack23a.py::"
              "test_two_engines_dumps_and_tracebacks_interleaved_each_take_their_own"],
    "T140e": ["tests/hostile/test_round23_attack23a.py::"
              "test_an_id_escaped_past_unicode_is_no_printed_id"],
    "T140f": ["tests/hostile/test_round23_attack23a.py::"
              "test_open_many_skip_names_the_captures_it_leaves_out"],
    "T140g": ["tests/hostile/test_round23_attack23a.py::"
              "test_every_space_that_is_not_one_is_escaped"],
    "T144a": ["tests/hostile/test_round23_fix23c.py::"
              "test_a_first_process_closing_as_it_forks_leaves_its_copy_the_folder"],
    "T144b": ["tests/hostile/test_round23_fix23c.py::"
              "test_a_sigint_as_the_closes_hold_is_taken_loses_no_probe_stop"],
    "T145a": ["tests/hostile/test_round23_fix23d.py::"
              "test_the_histogram_legend_says_a_summary_record_s_value_is_its_min_or_max"],
    "T145b": ["tests/hostile/test_round23_fix23d.py::"
              "test_scan_of_summary_records_counts_them_apart"],
    "T145c": ["tests/hostile/test_round23_fix23d.py::"
              "test_redact_keeps_a_guard_event_s_row_and_bound_and_maps_its_value_as_the_records"],
    "T151a": ["tests/hostile/test_round24_lead.py::"
              "test_step_counts_do_not_order_the_capture",
              "tests/hostile/test_round24_lead.py::test_step_counts_agree_with_the_ordered_records",
              "tests/hostile/test_round24_lead.py::"
              "test_merged_counts_add_the_counts_of_a_step_seen_twice"],
    "T146a": ["tests/hostile/test_round24_fix24a.py::"
              "test_the_draft_title_counts_the_guard_events_and_names_the_first_two",
              "tests/hostile/test_round23_fix23a.py::"
              "test_the_draft_title_says_what_a_guard_event_claims_beside_the_records"],
    "T146b": ["tests/hostile/test_round24_fix24a.py::"
              "test_redact_says_a_guard_event_s_value_in_its_message_as_its_field_does",
              "tests/hostile/test_round22_lead.py::"
              "test_redact_says_the_numbers_of_kept_event_text_are_not_permuted"],
    "T146c": ["tests/hostile/test_round24_fix24a.py::"
              "test_the_plugin_s_item_of_an_empty_root_is_named_as_given"],
    "T146d": ["tests/hostile/test_round24_fix24a.py::"
              "test_a_run_of_combining_marks_is_escaped_in_every_output",
              "tests/hostile/test_round24_fix24a.py::"
              "test_two_mark_runs_and_the_run_escaped_never_print_alike",
              "tests/hostile/test_round24_fix24a.py::"
              "test_triage_s_html_and_table_escape_a_capture_name_s_run_of_marks",
              "tests/hostile/test_round24_fix24a.py::test_escaping_runs_of_marks_is_linear"],
    "T149a": ["tests/hostile/test_round24_attack24b.py::"
              "test_a_live_forked_copy_lets_its_parents_writer_process_end"],
    "T149b": ["tests/hostile/test_round24_attack24b.py::"
              "test_a_forked_copys_probe_stop_and_warnings_are_its_own"],
    "T149c": ["tests/hostile/test_round24_attack24b.py::"
              "test_a_record_that_comes_after_the_close_is_said",
              "tests/hostile/test_round24_attack24b.py::"
              "test_a_guard_finding_after_the_close_is_not_said_recorded"],
    "T149d": ["tests/hostile/test_round24_attack24b.py::"
              "test_a_record_a_signal_cuts_out_of_its_wait_for_room_is_counted",
              "tests/hostile/test_round24_attack24b.py::"
              "test_a_record_a_signal_cuts_out_of_its_outputs_copy_is_counted"],
    "T150a": ["tests/hostile/test_round24_attack24c.py::"
              "test_redact_does_not_give_an_unknown_version_this_machine_s",
              "tests/hostile/test_round24_attack24c.py::"
              "test_redact_does_not_put_this_machine_s_version_in_place_of_a_build_tag"],
    "T150b": ["tests/hostile/test_round24_attack24c.py::"
              "test_a_summary_value_beside_tensors_is_not_said_to_be_a_read_inside_an_allocation",
              "tests/hostile/test_round24_attack24c.py::"
              "test_the_next_step_of_summary_records_names_them_not_reads_inside_an_allocation",
              "tests/hostile/test_round24_attack24c.py::"
              "test_an_access_of_a_site_not_known_is_said_in_the_plural_as_accesses"],
    "T150c": ["tests/hostile/test_round24_attack24c.py::"
              "test_repro_takes_no_summary_record_for_a_failing_call_of_the_installed_vllm"],
    "T150d": ["tests/hostile/test_round24_attack24c.py::"
              "test_an_id_equal_to_the_embedding_rows_past_a_known_vocabulary_is_no_sentinel"],
    "T150e": ["tests/hostile/test_round24_attack24c.py::"
              "test_the_histogram_draws_the_sentinel_at_the_vocabulary_the_manifest_names"],
    "T150f": ["tests/hostile/test_round24_attack24c.py::"
              "test_redact_keeps_a_summary_record_s_least_value_at_most_its_greatest"],
    "T147a": ["tests/hostile/test_round24_fix24b.py::"
              "test_a_replay_stops_restarting_a_worker_that_outlives_its_deadline_on_every_record",
              "tests/hostile/test_round24_fix24b.py::"
              "test_the_timeouts_of_a_commands_replays_count_together",
              "tests/hostile/test_round24_fix24b.py::"
              "test_kernels_stops_restarting_a_replay_worker_that_outlives_its_deadline",
              "tests/hostile/test_round24_fix24b.py::"
              "test_shrink_of_records_its_worker_never_answers_says_which_deadline_to_lengthen",
              "tests/hostile/test_round24_fix24b.py::"
              "test_what_a_cut_says_to_lengthen_is_what_ended_its_clock"],
    "T147b": ["tests/hostile/test_round24_fix24b.py::test_a_failed_fork_leaves_no_join_mark"],
    "T148a": ["tests/hostile/test_round24_attack24a.py::"
              "test_a_line_of_no_prefix_inside_a_workers_traceback_ends_no_crash"],
    "T148b": ["tests/hostile/test_round24_attack24a.py::"
              "test_two_workers_tracebacks_after_an_assert_interleaved_are_two_crashes"],
    "T148c": ["tests/hostile/test_round24_attack24a.py::"
              "test_a_report_with_a_workers_traceback_inside_it_counts_no_crash"],
    "T148d": ["tests/hostile/test_round24_attack24a.py::"
              "test_the_timeline_note_says_its_value_is_the_steps_extreme"],
    "T153a": ["tests/hostile/test_round24_fix24d.py::"
              "test_the_patch_sentence_says_summary_values_are_not_judged_as_nothing_replays_them",
              "tests/hostile/test_round24_fix24d.py::"
              "test_the_patch_sentence_counts_reads_it_cannot_see_apart_from_summary_values"],
    "T153b": ["tests/hostile/test_round24_fix24d.py::"
              "test_the_draft_title_names_one_guard_claim_of_two_processes_once",
              "tests/hostile/test_round24_fix24d.py::"
              "test_the_draft_title_tells_two_elements_of_one_value_apart"],
    "T153c": ["tests/hostile/test_round24_fix24d.py::"
              "test_a_kernel_worker_s_answer_line_that_is_no_answer_is_an_error_of_its_record",
              "tests/hostile/test_round24_fix24d.py::"
              "test_a_kernel_worker_whose_first_line_is_not_json_is_one_line_exit_2"],
    "T152a": ["tests/hostile/test_round24_fix24c.py::"
              "test_an_engine_exception_after_the_close_is_said"],
    "T152b": ["tests/hostile/test_round24_fix24c.py::"
              "test_a_reused_pid_appends_to_no_earlier_processs_events"],
    "T155a": ["tests/hostile/test_round24_attack24e.py::"
              "test_the_engine_s_exception_says_the_guard_s_value_as_its_event_does"],
    "T155b": ["tests/hostile/test_round24_attack24e.py::"
              "test_a_histogram_of_row_indices_draws_no_rejection_sentinel"],
    "T155c": ["tests/hostile/test_round24_attack24e.py::"
              "test_the_next_steps_of_a_guard_s_raise_do_not_ask_to_rerun_in_guard_mode"],
    "T154a": ["tests/hostile/test_round24_attack24d.py::"
              "test_an_ok_answer_whose_outputs_cannot_be_read_is_an_error_no_value_explains"],
    "T154b": ["tests/hostile/test_round24_attack24d.py::"
              "test_a_plain_traceback_interleaved_with_a_prefixed_one_keeps_its_exception"],
    "T154c": ["tests/hostile/test_round24_attack24d.py::"
              "test_more_interleaved_tracebacks_than_are_kept_open_are_one_crash_each"],
    "T154d": ["tests/hostile/test_round24_attack24d.py::"
              "test_a_kernels_replay_worker_s_line_that_is_no_answer_is_said_so"],
    "T151b": ["tests/hostile/test_round24_lead.py::"
              "test_a_report_whose_kernel_worker_never_answers_is_written",
              "tests/hostile/test_round24_lead.py::"
              "test_a_wait_for_a_child_puts_off_the_alarm_of_a_block_that_allows_it",
              "tests/hostile/test_round24_lead.py::"
              "test_the_notebook_process_waits_past_a_cell_s_wait_for_a_child"],
    "T156a": ["tests/hostile/test_round25_fix25a.py::"
              "test_a_replay_stops_restarting_a_worker_that_dies_on_every_record",
              "tests/hostile/test_round25_fix25a.py::"
              "test_the_records_a_dying_worker_held_say_how_it_ended",
              "tests/hostile/test_round25_fix25a.py::"
              "test_shrink_of_records_its_worker_dies_on_names_no_deadline_to_lengthen",
              "tests/hostile/test_round25_fix25a.py::"
              "test_deaths_of_a_commands_replays_count_together"],
    "T156b": ["tests/hostile/test_round25_fix25a.py::"
              "test_kernels_stops_restarting_a_replay_worker_that_dies_on_every_launch"],
    "T156c": ["tests/hostile/test_round25_fix25a.py::"
              "test_a_direct_run_kernels_call_has_the_commands_limits"],
    "T156d": ["tests/hostile/test_round25_fix25a.py::"
              "test_a_split_triages_pieces_start_no_kernel_worker"],
    "T159a": ["tests/hostile/test_round25_attack25b.py::"
              "test_a_record_a_signal_cuts_before_it_is_queued_is_counted"],
    "T159b": ["tests/hostile/test_round25_attack25b.py::"
              "test_a_capture_swapped_for_a_link_during_its_replay_is_not_written_through"],
    "T159c": ["tests/hostile/test_round25_attack25b.py::"
              "test_a_launch_the_overall_deadline_cuts_is_not_run_not_unreplayable"],
    "T158a": ["tests/hostile/test_round25_attack25a.py::"
              "test_an_engine_start_inside_a_report_leaves_a_later_crash_its_report",
              "tests/hostile/test_round25_attack25a.py::"
              "test_an_engine_start_inside_a_report_closes_the_crash_it_reports"],
    "T158b": ["tests/hostile/test_round25_attack25a.py::"
              "test_a_worker_s_lines_after_its_own_traceback_are_read",
              "tests/hostile/test_round25_attack25a.py::"
              "test_a_dropped_chain_s_worker_s_probe_lines_are_read"],
    "T158c": ["tests/hostile/test_round25_attack25a.py::"
              "test_a_capture_s_name_cannot_make_an_unreadable_capture_empty",
              "tests/hostile/test_round25_attack25a.py::"
              "test_a_capture_s_name_cannot_add_a_reason_to_its_group_s_title"],
    "T158d": ["tests/hostile/test_round25_attack25a.py::"
              "test_inspect_counts_no_report_past_int64"],
    "T158e": ["tests/hostile/test_round25_attack25a.py::"
              "test_dropped_chains_prefixes_hold_no_copy_of_the_log"],
    "T160a": ["tests/hostile/test_round25_attack25c.py::"
              "test_the_draft_title_names_a_guard_claim_s_row_as_the_batch_s_row",
              "tests/hostile/test_round24_fix24d.py::"
              "test_the_draft_title_tells_two_elements_of_one_value_apart"],
    "T160b": ["tests/hostile/test_round25_attack25c.py::"
              "test_the_next_steps_of_a_capture_taken_in_guard_mode_do_not_ask_for_it"],
    "T160c": ["tests/hostile/test_round25_attack25c.py::"
              "test_redact_names_the_probe_s_own_fields_it_drops_and_keeps_its_mode",
              "tests/hostile/test_round21_lead.py::"
              "test_redact_says_what_a_field_it_does_not_name_is"],
    "T160d": ["tests/hostile/test_round25_attack25c.py::"
              "test_a_probe_s_speculative_method_and_model_are_capture_facts",
              "tests/hostile/test_round25_attack25c.py::"
              "test_redact_names_the_probe_s_own_fields_it_drops_and_keeps_its_mode"],
    "T160e": ["tests/hostile/test_round25_attack25c.py::"
              "test_the_draft_title_of_a_guard_claim_alone_says_no_findings",
              "tests/hostile/test_round23_fix23a.py::"
              "test_the_draft_title_says_what_a_guard_event_claims_beside_the_records"],
    "T157a": ["tests/hostile/test_round25_fix25b.py::"
              "test_a_guard_event_inside_its_own_bound_is_not_relayed_as_a_violation",
              "tests/hostile/test_round25_fix25b.py::"
              "test_guard_events_inside_and_outside_their_bounds_are_counted_apart"],
    "T157b": ["tests/hostile/test_round25_fix25b.py::"
              "test_the_sentinel_inside_padded_rows_is_a_wrong_input_not_a_crash",
              "tests/hostile/test_round25_fix25b.py::"
              "test_an_id_past_the_vocabulary_in_padded_rows_is_said_and_one_of_it_is_not"],
    "T157c": ["tests/hostile/test_round25_fix25b.py::"
              "test_two_processes_byte_identical_segments_are_read",
              "tests/hostile/test_round25_fix25b.py::test_a_copy_of_a_segment_is_still_refused",
              "tests/hostile/test_linear_time.py::"
              "test_the_duplicate_check_still_finds_a_copy_among_many"],
    "T157d": ["tests/hostile/test_round25_fix25b.py::"
              "test_two_servers_reports_interleaved_are_both_counted"],
    "T157e": ["tests/hostile/test_round25_fix25b.py::"
              "test_two_hosts_tags_that_read_alike_are_two_processes",
              "tests/hostile/test_round24_fix24c.py::"
              "test_a_reused_pid_appends_to_no_earlier_processs_events"],
    "T164a": ["tests/hostile/test_round25_attack25d.py::"
              "test_a_refusal_raised_while_a_capture_is_built_keeps_its_message",
              "tests/hostile/test_round25_attack25d.py::"
              "test_shrink_says_why_it_refuses_to_write_the_capture_it_built"],
    "T164b": ["tests/hostile/test_round25_attack25d.py::"
              "test_shrink_of_two_records_its_worker_dies_on_writes_the_capture_it_keeps"],
    "T162a": ["tests/hostile/test_round25_fix25c.py::"
              "test_a_loop_of_single_record_calls_has_one_limit",
              "tests/hostile/test_round25_fix25c.py::"
              "test_a_reset_or_a_close_starts_the_count_again"],
    "T162b": ["tests/hostile/test_round25_fix25c.py::"
              "test_a_utf16_log_without_a_mark_is_named_by_its_line_ends",
              "tests/hostile/test_round25_fix25c.py::"
              "test_a_utf16_log_whose_head_has_no_line_end_is_of_unknown_order"],
    "T163a": ["tests/hostile/test_round25_fix25d.py::"
              "test_an_engine_exception_as_the_writer_thread_is_stalled_is_kept",
              "tests/hostile/test_round25_fix25d.py::"
              "test_the_events_past_the_bounded_wait_are_counted_apart",
              "tests/hostile/test_round25_fix25d.py::"
              "test_an_engine_exception_the_writer_process_ring_refuses_is_kept",
              "tests/hostile/test_round25_fix25d.py::"
              "test_readers_say_the_events_the_stalled_writer_could_not_take"],
    "T163b": ["tests/hostile/test_round25_fix25d.py::"
              "test_a_launch_a_signal_cuts_as_its_arguments_are_copied_is_not_counted"],
    "T165a": ["tests/hostile/test_round25_fix25e.py::"
              "test_a_wrong_token_whose_origin_the_patch_resolves_is_resolved",
              "tests/hostile/test_round25_fix25e.py::"
              "test_a_wrong_token_of_no_origin_still_leaves_its_site_in_violation"],
    "T165b": ["tests/hostile/test_round25_fix25e.py::"
              "test_an_engine_that_died_with_no_crash_event_is_said_to_have_died",
              "tests/hostile/test_round25_fix25e.py::"
              "test_triage_says_an_engine_that_died_with_no_crash_event_died",
              "tests/hostile/test_round25_fix25e.py::test_a_probe_start_s_step_is_no_crash_step",
              "tests/hostile/test_round23_attack23c.py::"
              "test_the_draft_of_a_capture_whose_engine_died_says_it_died"],
    "T166a": ["tests/hostile/test_round25_fix25f.py::"
              "test_the_capture_facts_do_not_quote_a_self_contradicting_guard_event_as_a_crash",
              "tests/hostile/test_round25_fix25f.py::"
              "test_a_self_contradicting_guard_event_makes_no_crash"],
    "T166b": ["tests/hostile/test_round25_fix25f.py::"
              "test_summary_drafts_an_issue_of_ids_read_in_padded_rows",
              "tests/hostile/test_round25_fix25f.py::"
              "test_findings_lists_the_ids_read_in_padded_rows"],
    "T166c": ["tests/hostile/test_round25_fix25f.py::"
              "test_a_summary_record_whose_greatest_id_is_in_padded_rows_is_said"],
    "T94a": ["tests/hostile/test_round17_attack17.py::"
             "test_an_empty_shared_view_of_a_huge_dimension_is_read_without_allocating",
             "tests/hostile/test_round17_attack17.py::"
             "test_an_empty_shared_view_within_numpy_reach_allocates_nothing_of_its_size"],
    "T94b": ["tests/hostile/test_round17_attack17.py::"
             "test_a_line_break_in_expected_json_begins_no_line_of_check"],
    "T94c": ["tests/hostile/test_round17_attack17.py::"
             "test_a_captures_folder_that_names_none_fails_its_run",
             "tests/hostile/test_round17_attack17.py::"
             "test_a_captures_folder_beside_one_that_names_none_is_still_collected"],
    "T94d": ["tests/hostile/test_round17_attack17.py::"
             "test_findings_names_the_records_that_ended_in_errors"],
    "T94e": ["tests/hostile/test_round17_attack17.py::"
             "test_triage_names_the_files_it_wrote_inert"],
    "T94f": ["tests/hostile/test_round17_attack17.py::"
             "test_a_capture_of_launches_alone_is_not_said_to_show_no_failure"],
    "T90a": ["tests/hostile/test_round16_fix16d.py::"
             "test_post_update_reads_past_a_row_are_planned_in_linear_time",
             "tests/hostile/test_round16_fix16d.py::"
             "test_a_rows_reads_past_it_are_found_first_last_and_at_an_id_outside",
             "tests/hostile/test_round16_fix16d.py::"
             "test_the_least_and_greatest_id_of_any_stretch_are_found"],
    "T90b": ["tests/hostile/test_round16_fix16d.py::"
             "test_each_finding_of_a_replay_by_another_source_says_so",
             "tests/hostile/test_round16_fix16d.py::"
             "test_the_worker_marks_a_source_hash_of_another_kernel"],
    "T90c": ["tests/hostile/test_round16_fix16d.py::"
             "test_a_summary_record_of_more_names_than_any_site_declares_is_refused",
             "tests/hostile/test_round16_fix16d.py::"
             "test_the_store_reader_refuses_a_summary_row_of_too_many_names"],
    "T85a": ["tests/hostile/test_round16_attack16.py::"
             "test_npz_string_members_are_held_to_one_budget_together",
             "tests/hostile/test_round16_attack16.py::"
             "test_npz_json_texts_count_their_lists_before_they_are_parsed"],
    "T85b": ["tests/hostile/test_round16_attack16.py::"
             "test_summary_says_known_issues_not_judged_without_the_engines_code"],
    "T85c": ["tests/hostile/test_round16_attack16.py::"
             "test_simulate_refuses_a_draft_fault_without_drafts",
             "tests/hostile/test_round16_attack16.py::"
             "test_simulate_keeps_faults_that_need_no_drafts_without_drafts"],
    "T85d": ["tests/hostile/test_round16_attack16.py::"
             "test_an_npz_member_in_bzip2_is_refused_unread",
             "tests/hostile/test_round16_attack16.py::"
             "test_a_pt_pickle_inflating_past_its_declared_size_is_read_to_that_size"],
    "T85e": ["tests/hostile/test_round16_attack16.py::"
             "test_replay_does_not_say_no_violation_of_a_variant_in_violation"],
    "T85f": ["tests/hostile/test_round16_attack16.py::"
             "test_a_lone_surrogate_is_refused_naming_the_source"],
    "T83a": ["tests/hostile/test_round16_fix16.py::"
             "test_looping_v2_records_stop_at_the_replays_overall_deadline",
             "tests/hostile/test_round16_fix16.py::"
             "test_replay_takes_a_deadline_and_ends_the_worker_it_cuts"],
    "T83b": ["tests/hostile/test_round16_fix16.py::"
             "test_inspect_refuses_an_index_whose_claims_its_batch_does_not_hold"],
    "T83c": ["tests/hostile/test_round16_fix16.py::"
             "test_triage_from_a_working_directory_past_path_max_says_why_it_cannot_start"],
    "T87a": ["tests/hostile/test_round16_fix16c.py::"
             "test_shrink_stops_at_its_overall_deadline_and_says_it_may_not_be_minimal",
             "tests/hostile/test_round16_fix16c.py::"
             "test_shrink_api_reports_the_stop_and_a_full_search_reports_none",
             "tests/hostile/test_round16_fix16c.py::"
             "test_shrink_refuses_a_deadline_out_of_range"],
    "T87b": ["tests/hostile/test_round16_fix16c.py::"
             "test_a_repro_case_process_ends_itself_at_its_deadline",
             "tests/hostile/test_round16_fix16c.py::"
             "test_the_repro_test_reads_a_case_process_cut_at_its_deadline_as_timed_out"],
    "T87c": ["tests/hostile/test_round16_fix16c.py::"
             "test_a_simulated_capture_whose_faults_never_fired_says_so",
             "tests/hostile/test_round16_fix16c.py::"
             "test_a_simulated_capture_names_the_faults_that_fired_and_how_often",
             "tests/hostile/test_round16_fix16c.py::"
             "test_a_simulated_v2_capture_says_no_fault_fired_when_none_did"],
    "T87d": ["tests/hostile/test_round16_fix16c.py::"
             "test_a_safetensors_of_many_metadata_keys_is_refused_before_any_is_parsed",
             "tests/hostile/test_round16_fix16c.py::"
             "test_a_pt_dict_of_many_keys_is_refused_before_any_value_is_converted",
             "tests/hostile/test_round16_fix16c.py::"
             "test_an_npz_metadata_of_many_keys_is_refused_naming_the_file"],
    "T87e": ["tests/hostile/test_round16_fix16c.py::"
             "test_schema_prints_a_site_named_twice_once"],
    "T87f": ["tests/hostile/test_round16_fix16c.py::"
             "test_a_triage_split_into_pieces_by_a_forged_index_is_an_error_row_with_the_fix"],
    "T88a": ["tests/hostile/test_round16_attack16b.py::"
             "test_race_check_never_says_they_agree_where_the_writer_produced_nothing",
             "tests/known/test_matching.py::"
             "test_the_race_check_reads_the_baseline_outputs_the_result_holds"],
    "T88b": ["tests/hostile/test_round16_attack16b.py::"
             "test_a_deadline_that_cuts_only_the_race_replay_is_one_true_sentence"],
    "T88c": ["tests/hostile/test_round16_attack16b.py::"
             "test_records_the_deadline_left_unjudged_never_read_as_no_failure"],
    "T88d": ["tests/hostile/test_round16_attack16b.py::"
             "test_race_check_never_says_they_agree_past_what_the_writer_holds"],
    "T88e": ["tests/hostile/test_round16_attack16b.py::"
             "test_race_check_counts_every_disagreement_and_keeps_only_its_cap"],
    "T88f": ["tests/hostile/test_round16_attack16b.py::"
             "test_a_crash_beside_unjudged_records_is_never_said_unexplained_by_the_values"],
    "T93a": ["tests/hostile/test_round17_fix17b.py::"
             "test_a_safetensors_header_of_many_keys_is_refused_before_it_is_parsed",
             "tests/hostile/test_round17_fix17b.py::"
             "test_a_safetensors_header_of_many_list_items_is_refused_before_it_is_parsed",
             "tests/hostile/test_round17_fix17b.py::"
             "test_keys_and_commas_inside_metadata_strings_are_not_counted",
             "tests/hostile/test_round17_fix17b.py::"
             "test_the_header_count_passes_every_header_of_a_records_fields",
             "tests/hostile/test_round17_fix17b.py::"
             "test_the_counts_before_parsing_take_linear_time"],
    "T93b": ["tests/hostile/test_round17_fix17b.py::"
             "test_a_pt_record_of_many_keys_is_refused_before_torch_is_imported",
             "tests/hostile/test_round17_fix17b.py::"
             "test_torch_save_of_records_with_large_field_dicts_is_imported",
             "tests/hostile/test_round17_fix17b.py::"
             "test_a_pt_record_of_many_keys_in_a_list_or_tuple_is_named",
             "tests/hostile/test_round17_fix17b.py::"
             "test_a_pickle_past_the_allocation_budget_is_refused_before_torch_loads_it",
             "tests/hostile/test_round17_fix17b.py::"
             "test_a_pt_record_of_many_keys_elsewhere_is_refused_once_its_pickle_is_read",
             "tests/hostile/test_round17_fix17b.py::"
             "test_an_ordered_dict_record_of_many_keys_is_refused_from_its_pickle",
             "tests/hostile/test_round17_fix17b.py::"
             "test_the_counts_before_parsing_take_linear_time",
             "tests/hostile/test_round16_fix16c.py::"
             "test_a_pt_dict_of_many_keys_is_refused_before_any_value_is_converted"],
    "T93c": ["tests/hostile/test_round17_fix17b.py::"
             "test_an_npz_metadata_of_many_keys_is_refused_before_their_values_are_parsed",
             "tests/hostile/test_round17_fix17b.py::"
             "test_an_npz_metadata_with_large_field_values_is_imported",
             "tests/hostile/test_round17_fix17b.py::"
             "test_an_object_read_key_by_key_is_what_json_reads",
             "tests/hostile/test_round16_fix16c.py::"
             "test_an_npz_metadata_of_many_keys_is_refused_naming_the_file"],
    "T97a": ["tests/hostile/test_round17_attack17d.py::"
             "test_a_capture_directory_whose_path_others_may_replace_is_said_in_one_line",
             "tests/hostile/test_round17_attack17d.py::"
             "test_a_capture_directory_on_a_private_path_is_said_nothing_of"],
    "T97b": ["tests/hostile/test_round17_attack17d.py::"
             "test_a_folder_swapped_between_its_mkdir_and_its_open_is_left_alone"],
    "T97c": ["tests/hostile/test_round17_attack17d.py::"
             "test_a_launch_of_many_tensors_copies_no_more_than_its_one_event_holds",
             "tests/hostile/test_round5_probe.py::"
             "test_a_launch_copies_no_more_than_one_event_holds"],
    "T97d": ["tests/hostile/test_round17_attack17d.py::"
             "test_a_capture_folder_renamed_before_the_first_record_loses_nothing"],
    "T97e": ["tests/hostile/test_round17_attack17d.py::"
             "test_hosts_whose_names_differ_past_forty_characters_get_their_own_process_tags"],
    "T96a": ["tests/hostile/test_round17_attack17c.py::"
             "test_a_pickle_named_in_capitals_is_scanned_as_torch_reads_it",
             "tests/hostile/test_round17_attack17c.py::"
             "test_a_pickle_named_in_capitals_is_held_to_the_pickle_size"],
    "T96b": ["tests/hostile/test_round17_attack17c.py::"
             "test_an_archive_of_two_directories_is_refused_before_torch_reads_the_other",
             "tests/hostile/test_round17_attack17c.py::"
             "test_bytes_around_a_torch_archive_are_refused"],
    "T96c": ["tests/hostile/test_round17_attack17c.py::"
             "test_a_record_made_by_a_call_on_many_keys_is_refused_from_its_pickle",
             "tests/hostile/test_round17_attack17c.py::"
             "test_records_of_tensors_and_ordered_dicts_are_imported"],
    "T96d": ["tests/hostile/test_round17_attack17c.py::"
             "test_a_dict_given_as_a_calls_argument_is_not_named_as_a_record",
             "tests/hostile/test_round17_attack17c.py::"
             "test_the_pickle_scan_takes_linear_time"],
    "T96e": ["tests/hostile/test_round17_attack17c.py::"
             "test_a_torch_save_without_crc_is_imported",
             "tests/hostile/test_round17_attack17c.py::"
             "test_a_member_zipfile_cannot_read_is_not_called_a_bare_pickle"],
    "T96f": ["tests/hostile/test_round17_attack17c.py::"
             "test_a_field_dict_set_by_one_setitem_is_not_refused_as_a_record",
             "tests/hostile/test_round17_attack17c.py::"
             "test_the_pickle_scan_takes_linear_time"],
    "T100a": ["tests/hostile/test_round18_fix18.py::"
              "test_a_torch_storage_past_the_budget_is_refused_before_torch_reads_it",
              "tests/hostile/test_round18_fix18.py::"
              "test_a_storage_two_keys_share_names_both_and_one_no_key_names_none",
              "tests/hostile/test_round18_fix18.py::"
              "test_a_torch_storage_within_the_budget_is_imported",
              "tests/hostile/test_round18_fix18.py::"
              "test_an_npz_array_past_the_budget_is_refused_before_numpy_reads_it"],
    "T100b": ["tests/hostile/test_round18_fix18.py::"
              "test_a_many_keyed_build_state_names_the_record_it_is_built_into"],
    "T100d": ["tests/hostile/test_round18_fix18.py::"
              "test_without_proc_the_capture_folder_is_not_written_through_its_name",
              "tests/hostile/test_round18_fix18.py::"
              "test_without_proc_the_writer_process_refuses_to_start",
              "tests/hostile/test_round18_fix18.py::"
              "test_without_proc_the_probe_refuses_to_start_in_one_line"],
    "T104a": ["tests/hostile/test_round18_attack18c.py::"
              "test_a_misspelt_setting_is_refused",
              "tests/hostile/test_round18_attack18c.py::"
              "test_a_name_of_another_tool_is_left_alone",
              "tests/hostile/test_round18_attack18c.py::"
              "test_the_plugin_refuses_a_misspelt_setting_before_it_starts"],
    "T104b": ["tests/hostile/test_round18_attack18c.py::"
              "test_the_recorders_older_names_are_read"],
    "T104c": ["tests/hostile/test_round18_attack18c.py::"
              "test_a_selection_of_no_kernel_is_refused",
              "tests/hostile/test_round18_attack18c.py::"
              "test_a_recorder_setting_with_the_recorder_off_is_refused"],
    "T104d": ["tests/hostile/test_round18_attack18c.py::"
              "test_record_handoff_asked_of_the_writer_thread_is_refused",
              "tests/hostile/test_round18_attack18c.py::"
              "test_the_manifest_states_the_handoff_its_writer_does"],
    "T104e": ["tests/hostile/test_round18_attack18c.py::"
              "test_a_sigterm_ignored_does_not_stop_the_probe",
              "tests/hostile/test_round18_attack18c.py::"
              "test_a_graceful_sigterm_handler_does_not_stop_the_probe"],
    "T104f": ["tests/hostile/test_round18_attack18c.py::"
              "test_a_guard_error_says_where_its_records_are_only_when_they_are"],
    "T104g": ["tests/hostile/test_round18_attack18c.py::"
              "test_sites_the_runner_never_calls_are_said"],
    "T104h": ["tests/hostile/test_round18_attack18c.py::"
              "test_a_check_of_fewer_variants_says_which_it_did_not_check",
              "tests/hostile/test_round18_attack18c.py::"
              "test_the_plugins_pass_names_the_variants_it_did_not_check"],
    "T100e": ["tests/hostile/test_round18_fix18.py::"
              "test_ranks_holding_the_same_values_in_other_shapes_diverge_naming_both",
              "tests/hostile/test_round18_fix18.py::"
              "test_ranks_holding_the_same_values_in_the_same_shape_do_not_diverge"],
    "T100c": ["tests/hostile/test_round18_fix18.py::"
              "test_an_npz_field_dict_of_many_keys_is_refused_before_it_is_parsed",
              "tests/hostile/test_round18_fix18.py::"
              "test_an_npz_metadata_of_a_million_empty_objects_is_refused_before_it_is_parsed",
              "tests/hostile/test_round18_fix18.py::"
              "test_a_safetensors_field_dict_of_many_keys_is_refused_before_it_is_parsed",
              "tests/hostile/test_round18_fix18.py::"
              "test_a_pt_field_dict_of_many_keys_is_refused_from_its_pickle",
              "tests/hostile/test_round18_fix18.py::"
              "test_a_field_dict_of_as_many_keys_as_a_batch_holds_is_imported",
              "tests/hostile/test_round18_fix18.py::"
              "test_the_nesting_check_of_a_million_containers_takes_little_memory",
              "tests/hostile/test_round18_fix18.py::"
              "test_the_nesting_and_key_counts_are_linear"],
    "T102a": ["tests/hostile/test_round18_attack18b.py::"
              "test_shrink_says_it_left_out_the_records_of_a_site_not_installed"],
    "T102b": ["tests/hostile/test_round18_attack18b.py::"
              "test_a_batch_cut_short_is_said_not_read",
              "tests/hostile/test_round18_attack18b.py::"
              "test_an_event_line_cut_short_is_said_not_read",
              "tests/hostile/test_round18_attack18b.py::"
              "test_triage_does_not_call_a_capture_cut_short_clean",
              "tests/hostile/test_round18_attack18b.py::"
              "test_findings_says_what_a_cut_tail_left_unread"],
    "T102c": ["tests/hostile/test_round18_attack18b.py::"
              "test_the_events_the_probe_left_out_are_said",
              "tests/hostile/test_round18_attack18b.py::"
              "test_inspect_and_kernels_say_the_events_the_probe_left_out",
              "tests/hostile/test_round18_attack18b.py::"
              "test_triage_does_not_call_a_capture_missing_events_clean"],
    "T102d": ["tests/hostile/test_round18_attack18b.py::"
              "test_the_records_the_probe_never_wrote_are_said",
              "tests/hostile/test_round18_attack18b.py::"
              "test_inspect_and_triage_say_the_records_the_probe_never_wrote"],
    "T107a": ["tests/hostile/test_round19_fix19a.py::"
              "test_ranks_holding_unlike_numbers_of_calls_of_a_step_are_not_compared",
              "tests/hostile/test_round19_fix19a.py::"
              "test_a_rank_holding_no_record_of_a_step_the_others_hold_is_not_compared",
              "tests/hostile/test_round19_fix19a.py::"
              "test_a_divergence_after_a_step_not_compared_is_found_and_the_step_said",
              "tests/hostile/test_round19_fix19a.py::"
              "test_every_triage_output_says_the_step_not_compared"],
    "T107b": ["tests/hostile/test_round19_fix19a.py::"
              "test_a_last_event_lacking_only_its_line_end_is_read",
              "tests/hostile/test_round19_fix19a.py::"
              "test_replay_says_the_crash_of_a_last_event_lacking_its_line_end",
              "tests/hostile/test_round19_fix19a.py::"
              "test_a_last_line_that_is_no_whole_event_is_still_not_read",
              "tests/hostile/test_round19_fix19a.py::"
              "test_a_writer_taking_over_keeps_a_whole_last_event"],
    "T107c": ["tests/hostile/test_round19_fix19a.py::"
              "test_a_pt_field_of_a_million_empty_containers_is_refused_from_its_pickle",
              "tests/hostile/test_round19_fix19a.py::"
              "test_a_pt_list_of_records_names_the_record_whose_field_holds_too_many",
              "tests/hostile/test_round19_fix19a.py::"
              "test_pt_records_of_many_containers_in_all_are_imported"],
    "T107d": ["tests/hostile/test_round19_fix19a.py::"
              "test_a_list_column_of_very_many_items_is_refused_before_they_are_built",
              "tests/hostile/test_round19_fix19a.py::"
              "test_replay_refuses_a_list_column_of_very_many_lists_alike",
              "tests/hostile/test_round19_fix19a.py::"
              "test_no_writer_of_ours_writes_a_row_a_reader_refuses"],
    "T107e": ["tests/hostile/test_round19_fix19a.py::"
              "test_an_npz_string_member_of_very_many_strings_is_refused_before_its_list_is_built"],
    "T108a": ["tests/hostile/test_round19_fix19b.py::"
              "test_a_sigterm_inside_a_flush_closes_the_session_once_the_flush_ends",
              "tests/hostile/test_round19_fix19b.py::"
              "test_a_sigterm_inside_a_flush_calls_the_engine_handler_after_it"],
    "T108b": ["tests/hostile/test_round19_fix19b.py::"
              "test_a_layer_of_the_hw_agnostic_registry_keeps_the_installed_one"],
    "T108c": ["tests/hostile/test_round19_fix19b.py::"
              "test_a_layer_name_new_to_vllm_leaves_with_the_diffs_copy"],
    "T108d": ["tests/hostile/test_round19_fix19b.py::"
              "test_a_custom_op_new_to_vllm_is_never_another_diffs"],
    "T108e": ["tests/hostile/test_round19_fix19b.py::"
              "test_a_segment_renamed_to_another_process_is_refused",
              "tests/hostile/test_linear_time.py::"
              "test_the_duplicate_check_still_finds_a_copy_among_many"],
    "T109a": ["tests/hostile/test_round19_attack19a.py::"
              "test_known_says_no_step_of_an_event_that_has_none"],
    "T109b": ["tests/hostile/test_round19_attack19a.py::"
              "test_repro_of_a_capture_of_no_records_says_it_holds_none",
              "tests/hostile/test_round19_attack19a.py::"
              "test_repro_of_a_capture_cut_short_names_what_was_not_judged",
              "tests/hostile/test_round19_attack19a.py::"
              "test_summary_says_why_there_is_no_reproducer_of_what_was_not_judged"],
    "T109c": ["tests/hostile/test_round19_attack19a.py::"
              "test_check_advice_for_a_missing_variant_keeps_the_others",
              "tests/hostile/test_round19_attack19a.py::"
              "test_check_advice_names_every_variant_checked"],
    "T109d": ["tests/hostile/test_round19_attack19a.py::"
              "test_check_of_a_capture_cut_short_says_its_end_was_not_checked",
              "tests/hostile/test_round19_attack19a.py::"
              "test_check_of_records_the_probe_never_wrote_says_so",
              "tests/hostile/test_round19_attack19a.py::"
              "test_the_plugin_warns_of_a_capture_cut_short_that_matches"],
    "T109e": ["tests/hostile/test_round19_attack19a.py::"
              "test_the_repro_names_the_function_it_ran_whatever_the_data_file_says"],
    "T109f": ["tests/hostile/test_round19_attack19a.py::"
              "test_shrink_names_the_steps_kept_in_one_short_line"],
    "T109g": ["tests/hostile/test_round19_attack19a.py::"
              "test_a_shrunk_capture_says_where_its_engine_stopped"],
    "T109h": ["tests/hostile/test_round19_attack19a.py::"
              "test_summary_text_says_what_was_not_read"],
    "T110a": ["tests/hostile/test_round19_attack19b.py::test_a_worker_that_died_is_a_crash_event",
              "tests/hostile/test_round19_attack19b.py::"
              "test_the_reports_of_one_death_are_one_crash",
              "tests/hostile/test_round19_attack19b.py::"
              "test_a_death_after_a_cuda_error_is_that_errors",
              "tests/hostile/test_round19_attack19b.py::"
              "test_a_death_quoted_by_another_logger_is_no_crash"],
    "T110b": ["tests/hostile/test_round19_attack19b.py::"
              "test_a_position_just_below_zero_reads_block_0_of_its_row",
              "tests/hostile/test_round19_attack19b.py::"
              "test_a_block_index_before_the_row_is_the_one_the_kernel_reads",
              "tests/hostile/test_round8b_kernels.py::"
              "test_a_block_size_past_the_positions_dtype_is_judged"],
    "T110c": ["tests/hostile/test_round19_attack19b.py::"
              "test_a_kernel_outside_the_selection_is_not_said_never_launched",
              "tests/hostile/test_round19_attack19b.py::"
              "test_a_capture_without_a_count_says_no_kernel_never_launched",
              "tests/hostile/test_round19_attack19b.py::"
              "test_a_kernel_every_selection_chose_is_still_never_launched"],
    "T110d": ["tests/hostile/test_round19_attack19b.py::"
              "test_a_contract_finding_says_how_many_elements_it_does_not_list"],
    "T110e": ["tests/hostile/test_round19_attack19b.py::"
              "test_a_capture_of_another_vllm_says_the_vllm_variant_runs_the_installed_one",
              "tests/test_resolution.py::"
              "test_a_capture_of_another_vllm_says_the_models_copy_another_version"],
    "T116a": ["tests/hostile/test_round20_attack20b.py::"
              "test_a_died_traceback_after_a_crash_is_that_crash",
              "tests/hostile/test_round20_attack20b.py::test_a_died_traceback_alone_is_still_a_crash"],
    "T116b": ["tests/hostile/test_round20_attack20b.py::"
              "test_check_advice_through_fewer_variants_keeps_the_others",
              "tests/test_share_cli.py::"
              "test_one_evidence_type_serialises_as_expected_json_and_differs_on_its_own_keys"],
    "T116c": ["tests/hostile/test_round20_attack20b.py::"
              "test_a_baseline_accepted_in_any_order_matches_its_check"],
    "T116d": ["tests/hostile/test_round20_attack20b.py::"
              "test_a_wrong_token_that_is_no_zero_is_not_called_zeros"],
    "T116e": ["tests/hostile/test_round20_attack20b.py::"
              "test_a_crash_is_not_explained_by_a_value_the_variant_cannot_see"],
    "T116f": ["tests/hostile/test_round20_attack20b.py::"
              "test_accept_through_fewer_variants_says_what_it_drops"],
    "T116g": ["tests/hostile/test_round20_attack20b.py::"
              "test_an_explained_crash_is_not_checked_by_fewer_variants"],
    "T116h": ["tests/hostile/test_round20_attack20b.py::"
              "test_a_crash_verdict_no_variant_judged_is_said_unchecked"],
    "T119a": ["tests/hostile/test_round20_fix20b.py::test_an_unseen_count_is_a_read_modify_write",
              "tests/hostile/test_round20_fix20b.py::"
              "test_each_kernels_accesses_have_their_true_word",
              "tests/hostile/test_round20_fix20b.py::"
              "test_only_the_kernels_that_write_declare_writes"],
    "T119b": ["tests/hostile/test_round20_fix20b.py::"
              "test_a_crash_after_a_line_naming_no_step_is_at_an_unknown_step",
              "tests/hostile/test_round20_fix20b.py::"
              "test_a_crash_after_a_line_naming_its_step_is_at_that_step",
              "tests/hostile/test_round20_fix20b.py::"
              "test_triage_says_the_first_crash_step_is_unknown"],
    "T119c": ["tests/hostile/test_round20_fix20b.py::"
              "test_a_record_counted_and_never_written_is_said",
              "tests/hostile/test_round20_fix20b.py::"
              "test_dropped_and_unaccounted_records_are_counted_together",
              "tests/hostile/test_round20_fix20b.py::"
              "test_counts_that_add_up_or_are_no_counts_add_nothing"],
    "T110f": ["tests/hostile/test_round19_attack19b.py::"
              "test_a_fatal_python_error_is_a_crash_and_its_report_joins_it"],
    "T115a": ["tests/hostile/test_round20_attack20a.py::"
              "test_a_death_after_later_steps_is_a_crash_of_its_own",
              "tests/hostile/test_round20_attack20a.py::"
              "test_an_engine_dead_after_later_steps_is_a_crash_of_its_own",
              "tests/hostile/test_round20_attack20a.py::"
              "test_a_death_right_after_its_crash_still_joins_it"],
    "T115b": ["tests/hostile/test_round20_attack20a.py::"
              "test_a_dump_is_not_given_the_exception_of_a_later_dump",
              "tests/hostile/test_round20_attack20a.py::"
              "test_dumps_of_two_engines_keep_their_own_exceptions"],
    "T115c": ["tests/hostile/test_round20_attack20a.py::"
              "test_findings_of_a_request_no_record_names_says_so"],
    "T115d": ["tests/hostile/test_round20_attack20a.py::"
              "test_a_probe_line_naming_a_negative_step_or_rank_is_refused"],
    "T115e": ["tests/hostile/test_round20_attack20a.py::"
              "test_the_engine_dead_reports_of_every_failed_request_are_one_crash",
              "tests/hostile/test_round20_attack20a.py::"
              "test_engine_dead_reports_without_a_crash_before_are_one_crash"],
    "T115f": ["tests/hostile/test_round20_attack20a.py::"
              "test_a_request_id_holding_a_brace_keeps_the_dumps_batch",
              "tests/hostile/test_round20_attack20a.py::"
              "test_a_dumped_dict_of_hostile_keys_is_read_in_linear_time"],
    "T115g": ["tests/hostile/test_round20_attack20a.py::"
              "test_a_fatal_error_at_interpreter_shutdown_is_no_crash"],
    "T115h": ["tests/hostile/test_round20_attack20a.py::"
              "test_a_death_after_an_engines_restart_is_a_crash_of_its_own"],
    "T110g": ["tests/hostile/test_round19_attack19b.py::"
              "test_the_count_of_findings_is_that_of_the_lines_listed"],
    "T112a": ["tests/hostile/test_round19_attack19c.py::"
              "test_findings_of_a_request_says_the_findings_that_name_none"],
    "T112b": ["tests/hostile/test_round19_attack19c.py::"
              "test_a_step_not_compared_is_said_on_every_rank_of_the_engine",
              "tests/hostile/test_round19_attack19c.py::"
              "test_a_rank_named_by_the_step_before_a_divergence_is_not_clean"],
    "T112c": ["tests/hostile/test_round19_attack19c.py::"
              "test_a_rank_holding_no_record_of_a_site_is_not_compared",
              "tests/hostile/test_round19_attack19c.py::"
              "test_ranks_that_hold_a_site_are_still_compared_beside_one_that_holds_none",
              "tests/hostile/test_round19_attack19c.py::"
              "test_ranks_holding_no_record_of_a_site_are_found_in_linear_time"],
    "T112d": ["tests/hostile/test_round19_attack19c.py::"
              "test_a_rank_the_first_divergence_does_not_name_is_not_clean"],
    "T113a": ["tests/hostile/test_round19_fix19c.py::"
              "test_a_rank_holding_a_site_only_outside_the_others_steps_is_not_compared",
              "tests/hostile/test_round19_fix19c.py::"
              "test_the_window_of_every_site_is_found_in_linear_time"],
    "T113b": ["tests/hostile/test_round19_fix19c.py::"
              "test_a_capture_naming_no_vllm_says_the_vllm_variant_runs_the_installed_one"],
    "T113c": ["tests/hostile/test_round19_fix19c.py::"
              "test_a_sigterm_while_another_thread_closes_waits_for_that_close",
              "tests/hostile/test_round19_fix19c.py::"
              "test_a_close_waiting_for_another_threads_close_lets_go_of_the_lock_it_holds"],
    "T114a": ["tests/hostile/test_round20_fix20a.py::"
              "test_summary_text_says_the_events_the_probe_left_out",
              "tests/hostile/test_round20_fix20a.py::"
              "test_check_says_the_events_the_probe_left_out"],
    "T114b": ["tests/hostile/test_round20_fix20a.py::"
              "test_known_does_not_call_records_of_a_site_not_known_no_failure",
              "tests/hostile/test_round20_fix20a.py::"
              "test_known_names_the_records_of_a_capture_of_a_site_not_known_only"],
    "T114c": ["tests/hostile/test_round20_fix20a.py::"
              "test_findings_says_the_records_the_probe_never_wrote"],
    "T114d": ["tests/hostile/test_round20_fix20a.py::"
              "test_json_of_a_rank_compared_up_to_the_first_divergence_holds_no_values",
              "tests/hostile/test_round20_fix20a.py::"
              "test_json_of_a_step_not_compared_holds_its_record_counts_not_values"],
    "T114e": ["tests/hostile/test_round20_fix20a.py::"
              "test_a_string_list_of_very_many_strings_is_refused_before_they_are_built",
              "tests/hostile/test_round20_fix20a.py::"
              "test_replay_and_the_writer_refuse_a_string_list_of_very_many_strings"],
    "T121a": ["tests/hostile/test_round20_attack20d.py::"
              "test_a_redacted_capture_says_the_events_its_probe_left_out"],
    "T121b": ["tests/hostile/test_round20_attack20d.py::"
              "test_a_redacted_capture_says_the_records_of_a_site_not_known_it_could_not_keep",
              "tests/hostile/test_round20_attack20d.py::"
              "test_a_redacted_capture_says_a_file_cut_short_it_could_not_keep"],
    "T120a": ["tests/hostile/test_round20_fix20c.py::"
              "test_an_engine_dead_line_after_a_crash_is_that_crashs_report",
              "tests/hostile/test_round20_fix20c.py::"
              "test_an_engine_dead_line_after_later_steps_or_a_restart_is_its_own_crash"],
    "T120b": ["tests/hostile/test_round20_fix20c.py::"
              "test_a_second_death_report_of_one_crash_is_kept",
              "tests/hostile/test_round20_fix20c.py::"
              "test_many_reports_are_counted_and_a_bounded_few_kept",
              "tests/hostile/test_round20_fix20c.py::"
              "test_a_redacted_capture_keeps_the_reports_public_text",
              "tests/hostile/test_round20_fix20c.py::"
              "test_a_report_read_from_a_cut_line_says_so"],
    "T120c": ["tests/hostile/test_round20_fix20c.py::"
              "test_dumps_of_two_engines_keep_their_tracebacks_in_the_opposite_order",
              "tests/hostile/test_round20_fix20c.py::"
              "test_many_engines_dumps_are_matched_in_linear_time"],
    "T120d": ["tests/hostile/test_round20_fix20c.py::"
              "test_simulate_says_no_fault_fired_on_its_line"],
    "T120e": ["tests/hostile/test_round20_fix20c.py::"
              "test_a_rank_not_written_in_ascii_digits_is_no_rank",
              "tests/hostile/test_round20_fix20c.py::"
              "test_a_rank_in_ascii_digits_is_read"],
    "T124a": ["tests/hostile/test_round21_attack21b.py::"
              "test_a_signal_inside_the_main_threads_flush_leaves_counts_that_are_true",
              "tests/hostile/test_round21_attack21b.py::"
              "test_a_copy_forked_while_the_main_thread_holds_its_signals_handles_them",
              "tests/hostile/test_round21_attack21b.py::"
              "test_a_signal_as_the_probe_frames_a_batch_loses_none_of_it"],
    "T124b": ["tests/hostile/test_round21_attack21b.py::"
              "test_the_kernel_recorders_dump_on_a_signal_waits_for_the_probes_framing"],
    "T124c": ["tests/hostile/test_round21_attack21b.py::"
              "test_what_the_v2_workers_code_prints_is_never_read_as_its_answer",
              "tests/hostile/test_round21_attack21b.py::"
              "test_a_workers_answer_stream_holds_its_answers_alone"],
    "T124d": ["tests/hostile/test_round21_attack21b.py::"
              "test_a_v2_worker_stuck_as_it_starts_times_out_its_records"],
    "T123a": ["tests/hostile/test_round21_attack21a.py::"
              "test_an_integer_past_the_digits_read_is_named_not_called_invalid_json",
              "tests/hostile/test_round21_attack21a.py::"
              "test_inspect_names_the_long_integer_in_one_line",
              "tests/hostile/test_round21_attack21a.py::"
              "test_an_integer_of_the_digits_read_still_parses"],
    "T123b": ["tests/hostile/test_round21_attack21a.py::"
              "test_a_request_id_spelling_a_dump_field_leaves_the_batch_unknown",
              "tests/hostile/test_round21_attack21a.py::"
              "test_known_never_says_a_dump_schedules_no_drafts_of_a_request_ids_text",
              "tests/hostile/test_round21_attack21a.py::"
              "test_a_dump_without_such_an_id_is_read_as_before"],
    "T123c": ["tests/hostile/test_round21_attack21a.py::"
              "test_each_engines_dump_takes_its_own_config_line",
              "tests/hostile/test_round21_attack21a.py::"
              "test_known_says_no_fact_two_dumps_state_differently",
              "tests/hostile/test_round21_attack21a.py::"
              "test_dump_facts_keep_a_fact_every_dump_states_alike",
              "tests/hostile/test_round21_attack21a.py::test_the_config_lines_kept_are_bounded"],
    "T123d": ["tests/hostile/test_round21_attack21a.py::"
              "test_drafts_of_a_request_the_counts_do_not_name_leave_the_batch_unknown",
              "tests/hostile/test_round21_attack21a.py::"
              "test_a_dump_without_such_an_id_is_read_as_before"],
    "T123e": ["tests/hostile/test_round21_attack21a.py::"
              "test_known_judges_each_crash_dump_on_its_own",
              "tests/hostile/test_round21_attack21a.py::test_one_crash_dump_is_said_as_before"],
    "T123f": ["tests/hostile/test_round21_attack21a.py::"
              "test_a_count_below_one_leaves_the_batch_unknown",
              "tests/hostile/test_round21_attack21a.py::test_a_plain_prefill_request_is_counted"],
    "T122a": ["tests/hostile/test_round21_fix21a.py::"
              "test_a_split_triage_names_the_origin_the_whole_replay_names",
              "tests/hostile/test_round21_fix21a.py::"
              "test_the_triage_rows_merge_the_pieces_replayed_again",
              "tests/hostile/test_round21_fix21a.py::"
              "test_an_origin_past_what_was_carried_is_said_not_searched"],
    "T122b": ["tests/hostile/test_round21_fix21a.py::"
              "test_inspect_of_a_redacted_capture_says_what_no_variant_judged",
              "tests/hostile/test_round21_fix21a.py::"
              "test_inspect_of_a_redacted_capture_names_the_sites_it_could_not_keep"],
    "T122c": ["tests/hostile/test_round21_fix21a.py::"
              "test_the_timeline_title_says_what_no_variant_judged"],
    "T122d": ["tests/hostile/test_round21_fix21a.py::test_a_time_is_written_as_it_is",
              "tests/hostile/test_round21_fix21a.py::test_markdown_renders_as_the_text"],
    "T122e": ["tests/hostile/test_round21_fix21a.py::test_a_redacted_capture_keeps_a_reports_cut"],
    "T122f": ["tests/hostile/test_round21_fix21a.py::"
              "test_the_probe_refuses_a_record_past_the_readers_caps"],
    "T123g": ["tests/hostile/test_round21_attack21a.py::"
              "test_known_says_a_cut_dumps_drafts_are_unknown",
              "tests/hostile/test_round21_attack21a.py::test_a_forged_dumps_reason_is_escaped"],
    "T123h": ["tests/hostile/test_round21_attack21a.py::"
              "test_a_request_id_spelling_a_bad_entry_leaves_the_batch_unknown",
              "tests/hostile/test_round9_attack9c.py::"
              "test_a_dump_naming_a_request_twice_leaves_its_batch_unknown",
              "tests/hostile/test_round14_attack.py::"
              "test_a_crash_dump_number_past_int64_is_refused_not_dropped"],
    "T127a": ["tests/hostile/test_round21_fix21b.py::"
              "test_an_entry_whose_dump_is_unread_is_not_judged",
              "tests/hostile/test_round21_fix21b.py::test_known_json_says_not_judged",
              "tests/hostile/test_round21_fix21b.py::test_judged_entries_are_said_as_before",
              "tests/hostile/test_round21_fix21b.py::"
              "test_a_false_clause_still_says_does_not_match"],
    "T127b": ["tests/hostile/test_round21_fix21b.py::"
              "test_a_draft_path_spelling_a_config_field_leaves_it_unknown",
              "tests/hostile/test_round21_fix21b.py::test_a_plain_config_is_read_as_before",
              "tests/hostile/test_round21_fix21b.py::"
              "test_an_imported_dumps_config_holds_no_paths_value"],
    "T127c": ["tests/hostile/test_round21_fix21b.py::test_triage_names_a_capture_inside_another",
              "tests/hostile/test_round21_fix21b.py::"
              "test_open_many_warns_of_a_capture_inside_another",
              "tests/hostile/test_round21_fix21b.py::test_no_note_without_a_nested_capture"],
    "T127d": ["tests/hostile/test_round21_fix21b.py::"
              "test_the_probes_folder_is_0700_under_umask_0277",
              "tests/hostile/test_round21_fix21b.py::"
              "test_simulate_makes_writable_folders_under_umask_0277",
              "tests/hostile/test_round21_fix21b.py::test_folders_keep_the_usual_umask_bits"],
    "T128a": ["tests/hostile/test_round21_attack21d.py::"
              "test_open_many_one_string_path_is_that_path",
              "tests/hostile/test_round21_attack21d.py::test_open_many_one_folder_named_alone",
              "tests/hostile/test_round21_attack21d.py::test_open_many_one_pathlike"],
    "T128b": ["tests/hostile/test_round21_attack21d.py::"
              "test_a_variant_named_upstream_is_the_upstream_model"],
    "T128c": ["tests/hostile/test_round21_attack21d.py::"
              "test_a_table_of_a_variant_or_site_not_replayed_is_refused"],
    "T128d": ["tests/hostile/test_round21_attack21d.py::"
              "test_shrink_and_redact_take_one_variant_or_field_alone"],
    "T128e": ["tests/hostile/test_round21_attack21d.py::"
              "test_embedding_guard_refuses_a_bad_rank_before_the_block"],
    "T128f": ["tests/hostile/test_round21_attack21d.py::"
              "test_plots_save_names_the_image_type_it_was_given"],
    "T128g": ["tests/hostile/test_round21_attack21d.py::"
              "test_an_expected_file_error_names_the_capture_inertly"],
    "T129a": ["tests/hostile/test_round21_fix21c.py::"
              "test_known_json_says_why_the_crash_is_not_explained",
              "tests/hostile/test_round21_fix21c.py::test_known_json_lead_is_empty_when_explained"],
    "T129b": ["tests/hostile/test_round21_fix21c.py::"
              "test_the_plugin_warns_of_a_capture_inside_another",
              "tests/hostile/test_round21_fix21c.py::"
              "test_a_nested_capture_named_itself_is_read_and_not_noted"],
    "T129c": ["tests/hostile/test_round21_fix21c.py::"
              "test_make_folders_sets_the_mode_under_a_umask_without_read",
              "tests/hostile/test_round21_fix21c.py::"
              "test_set_mode_follows_no_link_under_a_umask_without_read",
              "tests/hostile/test_round21_fix21c.py::test_the_path_descriptor_follows_no_link_either"],
    "T129d": ["tests/hostile/test_round21_fix21c.py::"
              "test_an_output_goes_through_folders_it_may_only_search"],
    "T129e": ["tests/hostile/test_round21_fix21c.py::"
              "test_a_captures_files_are_0600_under_umask_0477",
              "tests/hostile/test_round21_fix21c.py::"
              "test_an_output_writer_that_reads_its_file_back_is_served_under_umask_0477"],
    "T129f": ["tests/hostile/test_round21_fix21c.py::"
              "test_the_probe_makes_one_private_folder_under_umask_0477"],
}

#: claims that do not hold yet on this branch -> what they wait for (wire each to its test in
#: TESTS, and drop the doc's "(pending: ...)", when the work lands)
PENDING: dict[str, str] = {}


def claims() -> dict[str, str]:
    """Claim id -> its text, from the doc."""
    found = {m.group(1): m.group(2) for m in CLAIM_RE.finditer(DOC.read_text())}
    assert found, f"no claim (**T<n>**) in {DOC}"
    return found


def test_every_claim_has_a_test_or_is_listed_pending() -> None:
    ids = set(claims())
    assert ids - set(TESTS) - set(PENDING) == set(), "a claim without a test"
    assert set(TESTS) | set(PENDING) <= ids, "a test mapped to a claim the doc lacks"
    assert not set(TESTS) & set(PENDING)


def test_the_doc_marks_pending_exactly_the_pending_claims() -> None:
    marked = {claim for claim, text in claims().items() if "(pending:" in text}
    assert marked == set(PENDING)


def test_each_mapped_test_exists() -> None:
    """Each ``path::function`` names a test function defined at the top of that file."""
    for claim, tests in TESTS.items():
        assert tests, claim
        for test in tests:
            path, name = test.split("::")
            tree = ast.parse((ROOT / path).read_text())
            defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
            assert name.startswith("test_") and name in defined, f"{claim}: {test} not found"
