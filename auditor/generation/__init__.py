"""Text-to-image backends behind one protocol, chosen by spec (``diffusers:``, ``openai:``, ``folder:``)."""
