"""The bugs `python -m bench.mutations` puts in, one at a time, as data.

Each is one small, realistic bug against one guard of the product: a snippet of a file
(present exactly once: tests/bench/test_mutation_list.py checks that, so the list cannot
rot silently), what it becomes, the tests that must catch it now (`tests`), and those
that guarded the feature before issue 37 (`before`, tests of the commit before it; empty
where there were none). docs/mutations.md lists them with the results.

Features: the rows of issue 37's table and its other findings, then the features of the
issues before it: fleet, door (quoting, blocks), privacy (redaction, forget), chat,
retrieval switches, web page, journal, working memory, archive.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutation:
    name: str
    feature: str
    file: str
    original: str
    replacement: str
    bug: str
    tests: tuple[str, ...]
    before: tuple[str, ...] = ()


S = "tests/storage/test_store.py::"
PGB = "tests/storage/test_pgbouncer.py::"
PG = "tests/storage/test_postgres.py::"
Q = "tests/language/test_quoting.py::"
RED = "tests/language/test_redact.py::"
FORMS = "tests/working/test_form_input.py::"
WM = "tests/working/test_working_memory.py::"
FORGET = "tests/admin/test_forget_everywhere.py::"
IMPORT = "tests/admin/test_import.py::"
GUARD = "tests/web/test_guard.py::"
TOKEN = "tests/web/test_token_endpoint.py::"
CHAT = "tests/chat/test_chat.py::"
GATE = "tests/language/test_gate_model.py::"
HOLD = "tests/livekit/test_write_hold.py::"
WQ = "tests/journal/test_write_queue.py::"
DOOR = "tests/livekit/test_door.py::"
RET = "tests/retrieval/test_retrieval.py::"
ARCH = "tests/archive/test_archive.py::"

MUTATIONS: tuple[Mutation, ...] = (
    # ------------------------------------------------------------------ issue 37's table
    Mutation(
        "lock-kept-when-write-raises",
        "fleet",
        "memory/storage/locks.py",
        "        finally:\n            self._release(key, holder)",
        "        except StoreBusy:\n            raise\n        else:\n            self._release(key, holder)",
        "the per-user fact lock is given back only when the write succeeds",
        (S + "test_a_fact_write_that_fails_gives_the_users_lock_back",),
        (
            S + "test_two_writers_of_one_slot_at_once_leave_one_value",
            PGB + "test_the_per_user_fact_lock_holds_across_processes_and_outlives_no_dead_holder",
        ),
    ),
    Mutation(
        "quoting-drops-u276f",
        "door",
        "memory/language/quoting.py",
        "❮❯❰❱",
        "❮❰❱",
        "U+276F (heavy right-pointing angle quotation mark ornament) dropped from the look-alikes",
        (Q + "test_each_look_alike_bracket_is_written_as_an_escape",),
        (
            Q + "test_every_invisible_character_and_every_look_alike_is_escaped",
            "tests/livekit/test_memory_quoting.py::test_the_lookalike_table_holds_every_character_that_folds_to_an_angle_bracket",
            DOOR + "test_recalled_memories_cannot_close_or_forge_a_block",
        ),
    ),
    Mutation(
        "ssn-spaced-form-dropped",
        "privacy",
        "memory/language/secret_rules.py",
        r'|(?<!\d)(?<!\d )\d{3} \d{2} \d{4}(?!\d)"',
        '"',
        "the spaced SSN form (123 45 6789) dropped from the SSN rule",
        (RED + "test_a_secret_is_replaced_and_the_rest_kept",),
        (
            RED + "test_a_secret_is_replaced_and_the_rest_kept",
            "tests/language/test_redact_rules.py::test_each_rule_is_needed_take_it_out_and_a_secret_gets_through",
        ),
    ),
    Mutation(
        "ssn-spaced-after-a-word",
        "privacy",
        "memory/language/secret_rules.py",
        r"|(?<!\d)(?<!\d )\d{3} \d{2} \d{4}(?!\d)",
        r"|(?<![\d ])\d{3} \d{2} \d{4}(?!\d)",
        "the spaced SSN found only at the start, not after a word (main's look-behind)",
        (RED + "test_a_secret_is_replaced_and_the_rest_kept",),
    ),
    Mutation(
        "card-amex-prefix-dropped",
        "privacy",
        "memory/language/secret_rules.py",
        "2[2-7]|3[47]|3[05689]",
        "2[2-7]|3[05689]",
        "American Express's prefix (34, 37) dropped from the card rule",
        (RED + "test_a_secret_is_replaced_and_the_rest_kept",),
        (
            RED + "test_a_secret_is_replaced_and_the_rest_kept",
            "tests/language/test_redact_rules.py::test_each_rule_is_needed_take_it_out_and_a_secret_gets_through",
        ),
    ),
    Mutation(
        "forms-depth-80",
        "working memory",
        "memory/working/forms.py",
        "MAX_DEPTH = 8\n",
        "MAX_DEPTH = 80\n",
        "a form's nesting bound 8 -> 80",
        (FORMS + "test_the_nesting_bound_lets_8_levels_through_and_refuses_9",),
        (FORMS + "test_a_deeply_nested_form_is_refused_with_2400_and_changes_nothing",),
    ),
    Mutation(
        "forms-payload-160k",
        "working memory",
        "memory/working/forms.py",
        "MIN_PAYLOAD_BYTES = 16 * 1024",
        "MIN_PAYLOAD_BYTES = 160 * 1024",
        "a form's payload bound 16 KiB -> 160 KiB",
        (FORMS + "test_the_size_bound_reads_16_kib_and_refuses_one_byte_more",),
        (FORMS + "test_a_huge_form_is_refused_with_2413_before_it_is_parsed",),
    ),
    Mutation(
        "forget-skips-damaged-journals",
        "privacy",
        "memory/userdata.py",
        "    return [journal, *damaged_journals(journal)]",
        "    return [journal]",
        "forget skips the journals set aside as damaged",
        (FORGET + "test_forget_reaches_a_journal_set_aside_as_damaged",),
        (
            FORGET + "test_a_forget_is_idempotent_and_reports_counts_per_place",
            WQ + "test_forget_drops_the_users_waiting_and_dead_turns_not_others",
        ),
    ),
    Mutation(
        "import-line-user-wins",
        "privacy",
        "memory/admin/importer.py",
        'identity = user_id or item.get("user_id")',
        'identity = item.get("user_id") or user_id',
        "import lets a line's user_id win over --user: it writes into another user's memory",
        (IMPORT + "test_the_user_given_with_user_wins_over_the_user_id_a_file_names",),
        (IMPORT + "test_json_lines_of_turns_seed_a_user_with_their_dates",),
    ),
    Mutation(
        "csrf-skipped-for-replay",
        "web page",
        "memory/web/app.py",
        "    if session is not None and unsafe:",
        '    if session is not None and unsafe and request.path != "/dead-letters/replay":',
        "the CSRF check skipped for /dead-letters/replay",
        (GUARD + "test_every_state_changing_route_refuses_a_session_without_its_csrf_token",),
        (GUARD + "test_a_post_with_the_session_but_without_its_csrf_token_is_refused",),
    ),
    Mutation(
        "pool-size-ignored",
        "fleet",
        "memory/storage/store.py",
        "pool = open_pool(url, max_size=settings.db_max_connections)",
        "pool = open_pool(url)",
        "the pool's size not taken from MEMORY_DB_MAX_CONNECTIONS",
        (S + "test_the_pool_holds_as_many_connections_as_memory_db_max_connections_says",),
        ("tests/agent/test_settings.py",),
    ),
    Mutation(
        "preload-modules-removed",
        "fleet",
        "memory/livekit/startup.py",
        '        "preload_modules": ["memory.preload"],\n',
        "",
        "preload_modules removed from the worker: every job process loads Mem0 and the embedder itself",
        (
            "tests/agent/test_agent_entry.py::test_the_worker_has_livekits_forkserver_load_memory_once_for_every_job_process",
        ),
        ("tests/agent/test_agent_entry.py",),
    ),
    Mutation(
        "token-lives-15-hours",
        "web page",
        "memory/web/token_endpoint.py",
        "TOKEN_TTL = timedelta(minutes=15)",
        "TOKEN_TTL = timedelta(hours=15)",
        "/api/token's lifetime 15 minutes -> 15 hours",
        (TOKEN + "test_without_a_room_each_token_is_a_new_room_for_the_same_identity_and_expires_soon",),
        (TOKEN + "test_without_a_room_each_token_is_a_new_room_for_the_same_identity_and_expires_soon",),
    ),
    Mutation(
        "chat-budget-not-raised",
        "chat",
        "memory/chat/terminal.py",
        "budget_ms = max(settings.recall_budget_ms, CHAT_BUDGET_S * 1000)",
        "budget_ms = settings.recall_budget_ms",
        "the typed chat no longer waits at least 1 s for memory",
        (CHAT + "test_a_typed_reply_waits_at_least_a_second_for_memory",),
        (CHAT + "test_a_fact_typed_in_one_chat_is_recalled_in_the_next",),
    ),
    # ------------------------------------------------------------------ issue 37's other findings
    Mutation(
        "gate-threshold-ignored",
        "gatekeeper",
        "memory/language/gate_model.py",
        "        if p >= self.threshold:",
        "        if p >= 0.5:",
        "the learned gate's threshold ignored (0.5 instead)",
        (GATE + "test_the_model_passes_a_turn_only_when_its_probability_reaches_the_threshold",),
        (GATE[:-2],),
    ),
    Mutation(
        "fence-not-carried",
        "fleet",
        "memory/storage/store.py",
        "        meta.update(fence.payload())  # checked by the database as it writes, then taken off\n",
        "",
        "a fact write made under the lock carries no fence: a writer stalled past its lease overwrites",
        (
            S + "test_a_writer_stalled_past_its_lease_never_overwrites_a_newer_fact",
            PGB + "test_a_writer_stalled_past_its_lease_through_pgbouncer_never_overwrites_a_newer_fact",
        ),
    ),
    Mutation(
        "lock-steals-a-live-lease",
        "fleet",
        "memory/storage/locks.py",
        '"WHERE {t}.until < now() RETURNING 1"',
        '"RETURNING 1"',
        "the fact lock taken over whether or not its holder's lease has run out",
        (
            S + "test_two_writers_of_one_slot_at_once_leave_one_value",
            PGB + "test_two_writers_of_one_slot_through_pgbouncer_leave_one_value",
        ),
        (
            S + "test_two_writers_of_one_slot_at_once_leave_one_value",
            PGB + "test_the_per_user_fact_lock_holds_across_processes_and_outlives_no_dead_holder",
        ),
    ),
    Mutation(
        "embedded-user-raced",
        "fleet",
        "memory/storage/postgres.py",
        "        ensure_system_user()\n",
        "",
        "the embedded server's system user made by the library alone: starts at once on a fresh machine fail",
        ("tests/storage/test_embedded_user.py",),
    ),
    Mutation(
        "write-hold-removed",
        "journal",
        "memory/livekit/session.py",
        "            self.queue.hold(WRITE_HOLD_MAX_S)",
        "            pass",
        "the turn's write is not held while its reply is being made",
        (HOLD + "test_a_turn_is_written_after_its_reply_starts_to_play_and_is_then_stored",),
        (HOLD + "test_a_turn_is_written_after_its_reply_starts_to_play_and_is_then_stored",),
    ),
    Mutation(
        "write-hold-released-late",
        "journal",
        "memory/livekit/session.py",
        '        if ev.new_state == "speaking" or ev.old_state in ("thinking", "speaking"):',
        '        if ev.old_state == "speaking":',
        "the held write goes only when the reply has played, not at its first frame",
        (HOLD + "test_a_turn_is_written_after_its_reply_starts_to_play_and_is_then_stored",),
        (HOLD + "test_a_turn_is_written_after_its_reply_starts_to_play_and_is_then_stored",),
    ),
    # ------------------------------------------------------------------ fleet
    Mutation(
        "pgbouncer-prepared-statements",
        "fleet",
        "memory/storage/postgres.py",
        '"prepare_threshold": None, **DEAD_PEER},\n'
        "        configure=_configure,\n        open=False,\n    )\n    # Well",
        "**DEAD_PEER},\n        configure=_configure,\n        open=False,\n    )\n    # Well",
        "the pool prepares statements again: behind PgBouncer a later run finds its statement missing",
        (PGB + "test_repeated_queries_on_shared_server_connections_need_no_prepared_statements",),
        (PGB + "test_repeated_queries_on_shared_server_connections_need_no_prepared_statements",),
    ),
    Mutation(
        "schema-created-unlocked",
        "fleet",
        "memory/storage/postgres.py",
        "        conn.execute(\"SELECT pg_advisory_xact_lock(hashtextextended('memory-schema', 0))\")\n",
        "",
        "job processes create the schema without the advisory lock",
        (
            "tests/storage/test_schema_race.py::test_processes_creating_the_schema_at_once_all_succeed",
            PGB + "test_job_processes_creating_the_schema_at_once_through_pgbouncer_all_succeed",
        ),
        (
            "tests/storage/test_schema_race.py::test_processes_creating_the_schema_at_once_all_succeed",
            PGB + "test_job_processes_creating_the_schema_at_once_through_pgbouncer_all_succeed",
        ),
    ),
    Mutation(
        "zombie-counted-as-user",
        "fleet",
        "memory/storage/postgres.py",
        "return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE",
        "return psutil.Process(pid) is not None",
        "an exited job process not yet collected still counts as a user of the embedded server",
        (PG + "test_a_job_process_that_exited_but_was_not_collected_is_no_user_of_the_server",),
        (PG + "test_a_job_process_that_exited_but_was_not_collected_is_no_user_of_the_server",),
    ),
    Mutation(
        "older-statement-overwrites",
        "fleet",
        "memory/storage/store.py",
        'if current is not None and _said_before(said_at, current.metadata.get("timestamp")):',
        "if current is not None and False:",
        "an older statement arriving late (a replayed journal row) undoes a newer one",
        (S + "test_an_older_statement_arriving_late_does_not_undo_a_newer_one",),
        (S + "test_an_older_statement_arriving_late_does_not_undo_a_newer_one",),
    ),
    Mutation(
        "retention-lease-ignored",
        "fleet",
        "memory/archive/retention.py",
        '"WHERE name = %s AND (lease_until IS NULL OR lease_until < now()) "',
        '"WHERE name = %s "',
        "retention claimed whether or not another process holds its lease",
        (ARCH + "test_a_retention_run_in_progress_keeps_every_other_process_out",),
        (PGB + "test_retention_runs_once_for_processes_that_find_it_due_at_once",),
    ),
    # ------------------------------------------------------------------ door
    Mutation(
        "invisible-rlo-not-escaped",
        "door",
        "memory/language/quoting.py",
        r"\u2028-\u202e",
        r"\u2028-\u202d",
        "U+202E (right-to-left override) no longer escaped",
        (Q + "test_every_invisible_character_and_every_look_alike_is_escaped",),
        (Q + "test_every_invisible_character_and_every_look_alike_is_escaped",),
    ),
    Mutation(
        "summary-not-quoted",
        "door",
        "memory/livekit/blocks.py",
        'summary=quote({"note": " ".join(blocks.summary.split())})',
        'summary=" ".join(blocks.summary.split())',
        "a conversation's summary shown as it is, not as a quoted line",
        (DOOR + "test_a_summary_cannot_close_or_forge_a_block",),
        (DOOR + "test_a_summary_cannot_close_or_forge_a_block",),
    ),
    Mutation(
        "blocks-in-the-system-role",
        "door",
        "memory/livekit/blocks.py",
        'MEMORY_ROLE: llm.ChatRole = "assistant"',
        'MEMORY_ROLE: llm.ChatRole = "system"',
        "memory's blocks sent in the system role: stored text given the weight of instructions",
        (DOOR + "test_every_block_at_once_in_its_one_place_with_its_one_id",),
        (DOOR + "test_every_block_at_once_in_its_one_place_with_its_one_id",),
    ),
    Mutation(
        "context-notes-not-redacted",
        "door",
        "memory/storage/contexts.py",
        "text, _ = redact_secrets(shown_form(note))",
        "text = shown_form(note)",
        "a shared context's notes stored without redaction",
        ("tests/storage/test_context_notes.py::test_a_notes_secrets_are_never_stored",),
        ("tests/storage/test_context_notes.py::test_a_notes_secrets_are_never_stored",),
    ),
    # ------------------------------------------------------------------ privacy
    Mutation(
        "journal-purge-left-readable",
        "privacy",
        "memory/journal/queue.py",
        '        conn.execute("PRAGMA secure_delete = ON")  # the freed pages are zeroed, not left readable\n',
        "",
        "a forget's journal purge leaves the text in SQLite's free pages",
        (WQ + "test_purged_turns_leave_no_readable_text_in_the_journal_files",),
        (WQ + "test_purged_turns_leave_no_readable_text_in_the_journal_files",),
    ),
    Mutation(
        "history-purge-left-readable",
        "privacy",
        "memory/storage/store.py",
        '            db.execute("PRAGMA secure_delete = ON")  # freed pages are zeroed, not left readable\n',
        "",
        "a forget's purge of Mem0's history file leaves the text in SQLite's free pages",
        (S + "test_a_forget_leaves_no_readable_text_in_mem0s_history_file",),
        (S + "test_forget_user_removes_everything_searchable",),
    ),
    Mutation(
        "forgotten-turn-written",
        "privacy",
        "memory/storage/store.py",
        "        self._refuse_if_forgotten(user_id, said_at, write_id)\n        if write_id and (existing",
        "        if write_id and (existing",
        "a turn said before a forget, arriving after it (a journal during an outage), is stored",
        (S + "test_turns_said_before_forget_are_refused_and_later_ones_kept",),
        (S + "test_turns_said_before_forget_are_refused_and_later_ones_kept",),
    ),
    Mutation(
        "raw-transcripts-logged",
        "privacy",
        "memory/livekit/transcript_log.py",
        "                record.__dict__[key] = NOT_LOGGED",
        "                pass",
        "LiveKit's DEBUG lines keep the raw transcript",
        ("tests/livekit/test_transcript_log.py::test_raw_transcripts_are_not_logged_by_default",),
        ("tests/livekit/test_transcript_log.py::test_raw_transcripts_are_not_logged_by_default",),
    ),
    Mutation(
        "import-not-redacted",
        "privacy",
        "memory/admin/importer.py",
        "    kept, _ = redact_secrets(clean_text(text).strip())",
        "    kept = clean_text(text).strip()",
        "an import's texts stored without redaction",
        (IMPORT + "test_an_import_is_redacted_and_facts_pass_the_gatekeepers_rules",),
        (IMPORT + "test_an_import_is_redacted_and_facts_pass_the_gatekeepers_rules",),
    ),
    Mutation(
        "forget-skips-spill-files",
        "privacy",
        "memory/userdata.py",
        "        _spilled,\n        _delete_spilled,\n",
        "        _spilled,\n        lambda data, user_id: 0,\n",
        "forget leaves the user's turns in the workers' spill files",
        (FORGET + "test_forget_reaches_a_dead_workers_spill_file",),
        (FORGET + "test_forget_reaches_a_dead_workers_spill_file",),
    ),
    # ------------------------------------------------------------------ chat
    Mutation(
        "chat-quit-ignored",
        "chat",
        "memory/chat/terminal.py",
        'QUIT = ("/quit", "/exit", "quit", "exit", "/bye")',
        'QUIT = ("/exit", "quit", "exit", "/bye")',
        "/quit is no longer a way out of the chat (it is sent and stored as a message)",
        (CHAT + "test_a_fact_typed_in_one_chat_is_recalled_in_the_next",),
        (CHAT + "test_a_fact_typed_in_one_chat_is_recalled_in_the_next",),
    ),
    Mutation(
        "chat-without-a-model-starts",
        "chat",
        "memory/chat/terminal.py",
        'if not env.get("OPENAI_API_KEY", "").strip() and not env.get("OPENAI_BASE_URL", "").strip():',
        "if False:",
        "the chat starts without an OpenAI key or server and fails later, deep in LiveKit",
        (CHAT + "test_without_a_model_to_talk_to_it_says_so_before_loading_livekit",),
        (CHAT + "test_without_a_model_to_talk_to_it_says_so_before_loading_livekit",),
    ),
    Mutation(
        "chat-memory-note-silent",
        "chat",
        "memory/chat/terminal.py",
        "    recalled = sum(t.injected for t in memory.turns[before:])",
        "    recalled = 0",
        "the chat no longer says what memory gave a reply",
        (CHAT + "test_a_fact_typed_in_one_chat_is_recalled_in_the_next",),
        (CHAT + "test_a_fact_typed_in_one_chat_is_recalled_in_the_next",),
    ),
    # ------------------------------------------------------------------ retrieval switches
    Mutation(
        "fulltext-switch-ignored",
        "retrieval",
        "memory/retrieval/retriever.py",
        "if t not in _NEUTRAL] if s.retrieval.fulltext else []",
        "if t not in _NEUTRAL] if True else []",
        "MEMORY_RETRIEVAL_FULLTEXT=off no longer turns full-text recall off",
        (RET + "test_each_stage_switch_turns_its_stage_off",),
        (RET + "test_retrieval_settings_come_from_memory_retrieval_variables",),
    ),
    Mutation(
        "substring-switch-ignored",
        "retrieval",
        "memory/retrieval/retriever.py",
        "patterns = _like_patterns(words) if s.retrieval.substring else []",
        "patterns = _like_patterns(words) if True else []",
        "MEMORY_RETRIEVAL_SUBSTRING=off no longer turns substring recall off",
        (RET + "test_each_stage_switch_turns_its_stage_off",),
        (RET + "test_retrieval_settings_come_from_memory_retrieval_variables",),
    ),
    Mutation(
        "vector-switch-ignored",
        "retrieval",
        "memory/retrieval/retriever.py",
        "            if s.retrieval.vector:\n",
        "            if True:\n",
        "MEMORY_RETRIEVAL_VECTOR=off no longer turns the vector search off",
        (RET + "test_each_stage_switch_turns_its_stage_off",),
        (RET + "test_retrieval_settings_come_from_memory_retrieval_variables",),
    ),
    Mutation(
        "lexical-switch-ignored",
        "retrieval",
        "memory/retrieval/retriever.py",
        "        if not s.retrieval.lexical:  # Mem0's dense search alone",
        "        if False:  # Mem0's dense search alone",
        "MEMORY_RETRIEVAL_LEXICAL=off no longer falls back to Mem0's own search",
        (RET + "test_each_stage_switch_turns_its_stage_off",),
        (RET + "test_retrieval_settings_come_from_memory_retrieval_variables",),
    ),
    Mutation(
        "neighbours-switch-ignored",
        "retrieval",
        "memory/retrieval/retriever.py",
        'return self.settings.retrieval.neighbours > 0 and self.settings.retrieval.fusion == "weighted"',
        'return self.settings.retrieval.fusion == "weighted"',
        "MEMORY_RETRIEVAL_NEIGHBOURS=0 no longer turns the neighbours' share off",
        (RET + "test_each_stage_switch_turns_its_stage_off",),
        (RET + "test_retrieval_settings_come_from_memory_retrieval_variables",),
    ),
    Mutation(
        "gated-recalls-every-turn",
        "retrieval",
        "memory/service.py",
        "return self.mode is MemoryMode.NORMAL or needs_memory(text)",
        "return True",
        "GATED looks memory up on every turn, not only when the message needs it",
        ("tests/livekit/test_gated.py::test_gated_recalls_only_when_the_message_needs_memory",),
        ("tests/livekit/test_gated.py::test_gated_recalls_only_when_the_message_needs_memory",),
    ),
    # ------------------------------------------------------------------ web page
    Mutation(
        "templates-not-escaped",
        "web page",
        "memory/web/app.py",
        "autoescape=True,  # every template",
        "autoescape=False,  # every template",
        "the pages show stored text as markup",
        ("tests/web/test_pages.py::test_stored_markup_shows_as_text_and_runs_nothing",),
        ("tests/web/test_pages.py::test_stored_markup_shows_as_text_and_runs_nothing",),
    ),
    Mutation(
        "csp-allows-inline-script",
        "web page",
        "memory/web/security.py",
        "\"default-src 'none'; style-src 'self';",
        "\"default-src 'none'; script-src 'self'; style-src 'self';",
        "the pages' policy lets a script of the server's run",
        (GUARD + "test_pages_allow_no_script_no_framing_and_no_caching",),
        (GUARD + "test_pages_allow_no_script_no_framing_and_no_caching",),
    ),
    Mutation(
        "login-not-throttled",
        "web page",
        "memory/web/security.py",
        "        if len(tries.failures) < self.attempts:\n",
        "        if True:\n",
        "wrong secrets from one address are never slowed",
        (
            "tests/web/test_limits_and_proxy.py::test_wrong_bearer_secrets_are_limited_like_logins_and_the_right_one_still_gets_in",
        ),
        (GUARD + "test_wrong_secrets_from_one_address_are_slowed",),
    ),
    Mutation(
        "cross-site-post-allowed",
        "web page",
        "memory/web/app.py",
        "if unsafe and (why := guard.cross_site(request)):",
        "if False and (why := guard.cross_site(request)):",
        "a state-changing request from another origin is let through",
        (GUARD + "test_a_cross_origin_post_is_refused_even_with_the_session_and_its_token",),
        (GUARD + "test_a_cross_origin_post_is_refused_even_with_the_session_and_its_token",),
    ),
    Mutation(
        "access-log-keeps-query",
        "web page",
        "memory/web/app.py",
        "request.remote, request.method, request.path, response.status",
        "request.remote, request.method, request.path_qs, response.status",
        "the access log keeps ?q= and ?id= (what was searched for, whose page), past a forget",
        (GUARD + "test_the_access_log_leaves_out_queries",),
        (GUARD + "test_the_access_log_leaves_out_queries",),
    ),
    # ------------------------------------------------------------------ journal
    Mutation(
        "bad-input-retried",
        "journal",
        "memory/journal/queue.py",
        "never written\n                self._dead_letter(seq, turn_id, attempt, str(exc))\n",
        "never written\n                await self._retry(seq, turn_id, attempt, str(exc))\n",
        "a turn the store refuses for its content is retried instead of dead-lettered",
        (WQ + "test_bad_input_is_dead_lettered_and_later_turns_still_written",),
        (WQ + "test_bad_input_is_dead_lettered_and_later_turns_still_written",),
    ),
    Mutation(
        "enqueue-not-idempotent",
        "journal",
        "memory/journal/queue.py",
        '" ON CONFLICT (turn_id) DO NOTHING RETURNING seq",',
        '" RETURNING seq",',
        "a turn enqueued twice (an event seen twice) is refused by the journal's index",
        (WQ + "test_enqueue_is_idempotent_on_turn_id",),
        (WQ + "test_enqueue_is_idempotent_on_turn_id",),
    ),
    Mutation(
        "live-queue-rows-taken",
        "journal",
        "memory/journal/queue.py",
        '" WHERE state = ? AND (owner IS NULL OR (owner <> ? AND (lease_until < ?"',
        '" WHERE state = ? AND (owner IS NULL OR (owner <> ? AND (lease_until > ?"',
        "a queue takes over rows whose owner's lease is still running",
        (WQ + "test_two_live_queues_never_take_each_others_rows",),
        (WQ + "test_two_live_queues_never_take_each_others_rows",),
    ),
    # ------------------------------------------------------------------ working memory
    Mutation(
        "form-fields-not-redacted",
        "working memory",
        "memory/working/forms.py",
        "    fields, more = redact_document(checked)",
        "    fields, more = checked, []",
        "a form's fields kept and journaled without redaction",
        (FORMS + "test_a_durable_forms_secrets_reach_neither_journal_nor_model_nor_store",),
        (FORMS + "test_a_durable_forms_secrets_reach_neither_journal_nor_model_nor_store",),
    ),
    Mutation(
        "forms-evict-the-newest",
        "working memory",
        "memory/working/forms.py",
        "            key = others.pop(0)",
        "            key = others.pop()",
        "a full working memory evicts the most recently updated form",
        (WM + "test_the_bound_evicts_the_least_recently_updated_form",),
        (WM + "test_the_bound_evicts_the_least_recently_updated_form",),
    ),
    Mutation(
        "form-from-another-participant",
        "working memory",
        "memory/working/workspace.py",
        "        if caller != self.identity:",
        "        if not caller:",
        "a participant other than the session's user may submit forms",
        (WM + "test_the_worker_entrypoint_registers_the_form_method_and_starts_with_the_receptionist",),
        (WM + "test_the_worker_entrypoint_registers_the_form_method_and_starts_with_the_receptionist",),
    ),
    Mutation(
        "context-bound-ignored",
        "working memory",
        "memory/storage/contexts.py",
        "        if first and len(first[0]) > self.max_chars:",
        "        if False:",
        "a shared context's first note may exceed the context's bound",
        (
            "tests/storage/test_context_notes.py::test_the_bound_counts_what_is_stored_and_shown_after_nfkc",
            WM + "test_a_full_context_and_a_bad_note_get_clear_errors_and_keep_what_was_there",
        ),
        (
            "tests/storage/test_context_notes.py::test_the_bound_counts_what_is_stored_and_shown_after_nfkc",
            WM + "test_a_full_context_and_a_bad_note_get_clear_errors_and_keep_what_was_there",
        ),
    ),
    # ------------------------------------------------------------------ archive
    Mutation(
        "archive-row-written-twice",
        "archive",
        "memory/storage/archive.py",
        "VALUES (%s, %s, %s, %s, %s::vector, %s, %s, %s) ON CONFLICT (user_id, id) DO NOTHING RETURNING id",
        "VALUES (%s, %s, %s, %s, %s::vector, %s, %s, %s) RETURNING id",
        "an archived message replayed (a killed worker's journal) fails on its id instead of being a no-op",
        (ARCH + "test_an_archive_row_replayed_is_not_written_twice_and_a_damaged_one_is_refused",),
        (ARCH + "test_an_archive_row_replayed_is_not_written_twice_and_a_damaged_one_is_refused",),
    ),
    Mutation(
        "retention-cutoff-off-by-a-period",
        "archive",
        "memory/archive/retention.py",
        "    cutoff = now - timedelta(days=days)",
        "    cutoff = now - timedelta(days=2 * days)",
        "retention keeps messages twice as long as MEMORY_RETENTION_DAYS says",
        (ARCH + "test_retention_deletes_old_messages_and_raw_turns_and_keeps_summaries_and_facts",),
        (ARCH + "test_retention_deletes_old_messages_and_raw_turns_and_keeps_summaries_and_facts",),
    ),
)

__all__ = ["MUTATIONS", "Mutation"]
