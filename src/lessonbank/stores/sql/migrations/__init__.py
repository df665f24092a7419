"""Numbered migrations of the SQL store, one list per dialect. Append only: a released
migration never changes; opening a store applies the ones its database has not seen."""
