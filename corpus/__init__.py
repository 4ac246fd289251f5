"""The paper library: readers, chunks, embeddings, the FAISS index and local search."""
