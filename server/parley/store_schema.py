"""The store's schema: the migrations that make a fresh database and upgrade an old one
(`Store._migrate` applies those past the database's `PRAGMA user_version`, in order)."""

# Each entry upgrades the schema by one version (PRAGMA user_version). Append; never edit.
MIGRATIONS = [
    """
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        cwd TEXT NOT NULL,
        title TEXT,
        model TEXT NOT NULL,
        tool_policy TEXT NOT NULL,
        auto_approve TEXT NOT NULL DEFAULT '[]',
        system_prompt TEXT,
        turns INTEGER NOT NULL DEFAULT 0,
        rounds INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE INDEX sessions_by_update ON sessions (updated_at DESC);
    CREATE TABLE messages (
        session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        role TEXT NOT NULL,  -- user | assistant | tool
        body TEXT NOT NULL,  -- JSON, see encode_message
        created_at TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    CREATE TABLE usage (
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        call TEXT NOT NULL,  -- stream | sync: which call of the round was counted
        model TEXT NOT NULL,
        input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        thought_tokens INTEGER NOT NULL,
        cached_read_tokens INTEGER NOT NULL,
        cached_write_tokens INTEGER NOT NULL,
        cost REAL,  -- NULL when the model's price is unknown
        created_at TEXT NOT NULL
    );
    CREATE INDEX usage_by_session ON usage (session_id);
    """,
    # 2: a session may say its model calls tools in the text protocol (NULL: the model's own)
    "ALTER TABLE sessions ADD COLUMN tool_format TEXT",
    # 3: "always allow" holds in one workspace: approvals by workspace, {cwd: [tool, ...]};
    # and a lease, so that two servers (two windows) never run turns of one session at once
    """
    ALTER TABLE sessions ADD COLUMN approvals TEXT NOT NULL DEFAULT '{}';
    UPDATE sessions SET approvals = json_object(cwd, json(auto_approve))
        WHERE auto_approve != '[]';
    ALTER TABLE sessions DROP COLUMN auto_approve;
    CREATE TABLE leases (
        session_id TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
        holder TEXT NOT NULL,  -- the server instance running a turn in the session
        pid INTEGER NOT NULL,  -- its process: a dead holder's lease is taken over at once
        expires_at REAL NOT NULL  -- Unix time, renewed while the turn runs
    );
    """,
    # 4: checkpoints, what each turn's edits overwrote (so a turn's edits can be undone), and
    # the note that tells the model, at the next prompt, which files were restored
    """
    CREATE TABLE checkpoints (
        session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        turn INTEGER NOT NULL,  -- the session's turn count at that turn (1 is the first)
        path TEXT NOT NULL,  -- absolute, inside root
        root TEXT NOT NULL,  -- the workspace the turn ran in
        content BLOB,  -- the bytes before the turn's first write, NULL: the turn created it
        mode INTEGER,  -- its permission bits then (NULL when created)
        written TEXT,  -- the file as Parley last left it: sha256 hex, '' absent, NULL unknown
        created_at TEXT NOT NULL,
        PRIMARY KEY (session_id, turn, path)
    );
    ALTER TABLE sessions ADD COLUMN restore_note TEXT;
    """,
    # 5: the session's thinking level (off | low | medium | high; NULL: the model's default)
    "ALTER TABLE sessions ADD COLUMN thought_level TEXT",
    # 6: the session's budget in USD ('none': no limit; NULL: config.toml's), and the day's
    # spending summed by time
    """
    ALTER TABLE sessions ADD COLUMN budget TEXT;
    CREATE INDEX usage_by_time ON usage (created_at);
    """,
    # 7: compactions: the summary the model sees in place of the session's first `covers`
    # messages (the messages stay, for replay and export); the latest one holds
    """
    CREATE TABLE compactions (
        session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        covers INTEGER NOT NULL,  -- the number of messages, from the first, it summarises
        summary TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (session_id, covers)
    )
    """,
    # 8: each counted call's cost by kind of token (core.usage.CostBreakdown), NULL with an
    # unknown price, and in the calls counted before this (their `cost` is not split)
    """
    ALTER TABLE usage ADD COLUMN cost_uncached_input REAL;
    ALTER TABLE usage ADD COLUMN cost_cache_reads REAL;
    ALTER TABLE usage ADD COLUMN cost_cache_writes REAL;
    ALTER TABLE usage ADD COLUMN cost_output REAL
    """,
    # 9: context windows learned from providers (a refusal that named one, the server's own
    # answer, or half a refused request's estimate), by the provider's base URL and the model
    """
    CREATE TABLE learned_windows (
        base_url TEXT NOT NULL,
        model TEXT NOT NULL,  -- as sent to the provider
        tokens INTEGER NOT NULL,
        source TEXT NOT NULL,  -- message | server | estimate
        learned_at TEXT NOT NULL,
        PRIMARY KEY (base_url, model)
    )
    """,
    # 10: a call whose reply had thoughts the provider gave no count of (core.usage.Usage:
    # thought_tokens None); its thought_tokens is 0, and the totals' are unknown
    "ALTER TABLE usage ADD COLUMN thoughts_uncounted INTEGER NOT NULL DEFAULT 0",
    # 11: notices, what Parley said about a turn that stopped or a prompt it refused (never
    # sent to the model), kept where they came so that a replay shows them there again
    """
    CREATE TABLE notices (
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        place INTEGER NOT NULL,  -- the number of messages the conversation had then
        level TEXT NOT NULL,  -- info | warning | error
        text TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE INDEX notices_by_session ON notices (session_id, place)
    """,
    # 12: "allow always" for commands: the command prefixes (tools/command_rules.py) the user
    # allowed in a workspace (the session's root), for every session there
    """
    CREATE TABLE command_rules (
        workspace TEXT NOT NULL,
        prefix TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (workspace, prefix)
    )
    """,
    # 13: the session's mode: ask | accept_edits | plan (agent/modes.py)
    "ALTER TABLE sessions ADD COLUMN mode TEXT NOT NULL DEFAULT 'ask'",
    # 14: a retry replaces a cut-off turn (agent/sessions.py): where the session's last turn
    # starts while it is one a retry may replace, and how many turns were replaced (a window
    # that read the session before one was reads it again)
    """
    ALTER TABLE sessions ADD COLUMN cut_off_at INTEGER;
    ALTER TABLE sessions ADD COLUMN rewrites INTEGER NOT NULL DEFAULT 0
    """,
    # 15: a session's settings as one JSON object, read setting by setting by their declaration
    # (core/session_settings.py): a new setting needs no migration
    """
    ALTER TABLE sessions ADD COLUMN settings TEXT NOT NULL DEFAULT '{}';
    UPDATE sessions SET settings = json_object(
        'model', model, 'tool_policy', tool_policy, 'system_prompt', system_prompt,
        'tool_format', tool_format, 'thought_level', thought_level, 'budget', budget,
        'mode', mode
    );
    ALTER TABLE sessions DROP COLUMN model;
    ALTER TABLE sessions DROP COLUMN tool_policy;
    ALTER TABLE sessions DROP COLUMN system_prompt;
    ALTER TABLE sessions DROP COLUMN tool_format;
    ALTER TABLE sessions DROP COLUMN thought_level;
    ALTER TABLE sessions DROP COLUMN budget;
    ALTER TABLE sessions DROP COLUMN mode
    """,
]
