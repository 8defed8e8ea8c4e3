// Users and `er query --mention` find a record's node by the id they ingested.
CREATE INDEX er_mention_external_id IF NOT EXISTS FOR (n:Mention) ON (n.collection, n.external_id);
