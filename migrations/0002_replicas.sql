-- Operational state, not a projection (replay does not rebuild it): which gateway processes are alive.
-- Each server writes its heartbeat here; the reconciler bills the open requests of processes that
-- stopped heartbeating (crashed, killed) so that no started request stays unbilled.
CREATE TABLE replicas (
  replica     text PRIMARY KEY,
  started_at  timestamptz NOT NULL DEFAULT now(),
  last_seen   timestamptz NOT NULL DEFAULT now()
);
