// The canned queries find a record's node under the label Node (FalkorDB indexes no
// other node label, schema/falkordb/V0009); the same lookup indexed here.
CREATE INDEX er_node_external_id IF NOT EXISTS FOR (n:Node) ON (n.collection, n.external_id);
