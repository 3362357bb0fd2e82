"""What auditor sees in images: VQA answers and captions, image/text embeddings, detected objects and their masks."""
