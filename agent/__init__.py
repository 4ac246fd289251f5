"""scholarloop: cited, citation-checked answers to scientific literature questions."""
