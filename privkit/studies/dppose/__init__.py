"""The study of one paper: presets (what each scale decides) and experiments (designs, tables, claim checks)."""
