-- A node takes worlds only once it has reached itself at its advertised URL (its health
-- service answered, at that address, to the name only that process knows): placement picks
-- among the nodes so marked. Each (re)join starts unmarked.
ALTER TABLE cluster_nodes ADD COLUMN reached BOOLEAN NOT NULL DEFAULT FALSE;
