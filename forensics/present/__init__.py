"""What a person reads of a replay: the conclusion, fixed-column tables, plots, HTML
reports, the write-up for a bug thread, exported findings and the demo."""
