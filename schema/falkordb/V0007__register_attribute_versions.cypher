// Registers the property keys of versioned node attributes (the values a newer batch
// replaced, and the batch that replaced them) before any data is written; see V0002
// for why FalkorDB needs every key registered first.
CREATE (a:Node {key: '', collection: '', id: -1, prev_until: [0], prev_size: [0],
        prev_score: [0.0], prev_level_lo: [0], prev_level_hi: [0]})
DELETE a;
