// The external id as a field of the Node index, for `er query --mention` and users'
// lookups by record id (`MATCH (m:Node:Mention {collection: $c, external_id: $x})`).
// FalkorDB refuses a whole CREATE INDEX when one of its fields is indexed already, so
// the field has a statement of its own.
CREATE INDEX FOR (n:Node) ON (n.external_id);
