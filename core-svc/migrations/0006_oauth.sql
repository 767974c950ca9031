-- World store, schema version 6 ({backend}): OAuth sign-in. Clients registered by MCP clients,
-- approvals the operator decides at a terminal, and the refresh tokens of approved sign-ins.
-- Secrets (the page's request handle, the approval code, authorization codes, refresh
-- tokens) are kept only as the hex sha256 of their text.

CREATE TABLE oauth_clients (
    client_id TEXT PRIMARY KEY,
    client_name TEXT NOT NULL,
    redirect_uris_json TEXT NOT NULL,
    created_at {int} NOT NULL
);

-- One row per authorization request. status: pending → approved | denied; approved → issued
-- (the code went to the browser) → redeemed (exchanged; the chain of sessions lives) → revoked.
-- An approval's episode, grants and expiry are the operator's, set when approved; every
-- session minted under it ends at session_expires_at at the latest.
CREATE TABLE oauth_approvals (
    approval_id TEXT PRIMARY KEY,
    request_hash TEXT NOT NULL UNIQUE,
    approval_code_hash TEXT NOT NULL UNIQUE,
    client_id TEXT NOT NULL REFERENCES oauth_clients (client_id),
    redirect_uri TEXT NOT NULL,
    state TEXT,
    code_challenge TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'issued', 'redeemed', 'revoked')),
    created_at {int} NOT NULL,
    expires_at {int} NOT NULL,
    episode TEXT,
    grants_json TEXT,
    session_expires_at {int},
    code_hash TEXT UNIQUE,
    code_expires_at {int}
);
CREATE INDEX oauth_approvals_by_episode ON oauth_approvals (episode, approval_id);

-- The sessions minted under an approval, so revoking any of them ends them all.
CREATE TABLE oauth_sessions (
    credential_id TEXT PRIMARY KEY,
    approval_id TEXT NOT NULL REFERENCES oauth_approvals (approval_id)
);
CREATE INDEX oauth_sessions_by_approval ON oauth_sessions (approval_id, credential_id);

-- Refresh tokens are single-use: used_at is set when one is exchanged, and a second use ends
-- the approval's chain.
CREATE TABLE oauth_refresh_tokens (
    token_hash TEXT PRIMARY KEY,
    approval_id TEXT NOT NULL REFERENCES oauth_approvals (approval_id),
    issued_at {int} NOT NULL,
    used_at {int}
);
