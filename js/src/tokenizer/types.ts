/**
 * Tokenizer data as stored in .rknot metadata (`tokenizer` object) and as read from GGUF
 * (`tokenizer.ggml.*` keys) or a Hugging Face folder (tokenizer.model / tokenizer.json).
 * Field names mirror GGUF's tokenizer.ggml.* keys.
 */
export interface TokenizerData {
  /** 'llama' = SentencePiece-style (scores, byte fallback); 'gpt2' = byte-level BPE (merges). */
  model: 'llama' | 'gpt2';
  /** Pre-tokenizer name for byte-level BPE ('llama-bpe', 'qwen2', 'gpt2', ...), as GGUF tokenizer.ggml.pre. */
  pre?: string;
  tokens: string[];
  /** SentencePiece scores (model 'llama'). */
  scores?: number[];
  /** GGUF token types: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte. */
  token_type?: number[];
  /** BPE merges, "a b" strings, rank order (model 'gpt2'). */
  merges?: string[];
  bos_token_id?: number;
  eos_token_id?: number;
  /** Extra ids that end generation (e.g. <|im_end|>, <|eot_id|>, <|end|>). */
  eos_token_ids?: number[];
  unknown_token_id?: number;
  padding_token_id?: number;
  add_bos_token?: boolean;
  add_eos_token?: boolean;
  /** SentencePiece add_dummy_prefix (prepend a space); default true for 'llama'. */
  add_space_prefix?: boolean;
  /** Jinja chat template from the model's metadata. */
  chat_template?: string;
  /**
   * Byte-level BPE only: a pre-token that is itself a vocabulary entry is emitted whole, without merging
   * (HF BPE `ignore_merges`). Default: true for pre 'llama-bpe' (Llama 3), false otherwise.
   */
  ignore_merges?: boolean;
  /** Unicode normalization applied to plain text before tokenizing (HF normalizer, e.g. Qwen's NFC). Default none. */
  normalize?: 'NFC' | 'NFD' | 'NFKC' | 'NFKD';
}
