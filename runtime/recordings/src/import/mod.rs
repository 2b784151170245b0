//! Importers of local agents' transcripts.
