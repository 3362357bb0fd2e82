"""What auditor sees in images: VQA answers and captions, and image/text embeddings."""
