"""Error signatures -> cause, evidence to collect, fix; a data file and a matcher."""
