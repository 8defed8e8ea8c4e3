// The external id as a field of the Mention index. V0004 never took effect on FalkorDB:
// it refuses a whole CREATE INDEX when one of its fields (collection) is indexed already,
// and `er init` skips that error, so `er query --mention` scanned every mention.
CREATE INDEX FOR (n:Mention) ON (n.external_id);
