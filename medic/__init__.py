"""medic: keeps distributed GPU training jobs running."""
