//! What-if previews of NodePool edits (being written).
