-- At most one BillCorrected per request, as at most one Billed: the bill of the process that ran a
-- request, landed after another had reconciled it, replaces the estimate once.
CREATE UNIQUE INDEX event_log_one_correction_per_stream ON event_log (stream_id) WHERE event_type = 'BillCorrected';
