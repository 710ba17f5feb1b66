-- Version 7: intents rented together by one bulk create. Such a create
-- carries one label for all its offers, so each intent of the batch also
-- records that label; an instance is matched to its intent by the batch
-- label and its machine (a batch holds one offer per machine).

ALTER TABLE intents ADD COLUMN batch_label TEXT;
CREATE INDEX intents_by_batch ON intents (batch_label, machine_id);
