"""GridOps token layout (../shared/papers/gap.md 4.2-4.3): every row has the same fixed layout, so image slots and
latent slots sit at static positions for a whole batch (the latent rollout prefills one prompt length).

Prompt, PROMPT_LEN = 37 tokens, identical in length for every example:
    0       <bos>
    1       <img>
    2..10   9 image slots (token IMGSLOT; the decoder reads e_vis there through embeds / embed_mask)
    11      </img>
    12      moves:
    13..30  MAX_MOVES = 6 moves of 3 tokens each ("ROT _ _", "SWAPR 0 2", "SHIFTR 1 _"), padded with "NOP _ _"
    31      ;
    32      ask:
    33..36  question, 4 tokens: "cell r c ?", "rowsum r _ ?", "read _ _ ?"
Response (variant-dependent), then <eos>, then <pad> up to SEQ_LEN:
    latent:      <latent> LATSLOT x K </latent> [<parser> g g g | g g g | g g g </parser>] answer <eos>
    text (T1):   <parser> g g g | g g g | g g g </parser> answer <eos>
    direct (T0): answer <eos>
The answer is one digit for "cell", two digits (tens units, "0 9".."2 7") for "rowsum", and the 11-token grid
"g g g | g g g | g g g" for "read" (stage A's captions). The loss covers response tokens only, never the latent
slots (their inputs are vectors, their targets placeholders).
"""
WORDS = ("<pad>", "<bos>", "<eos>", "<img>", "</img>", "<imgslot>", "<latent>", "</latent>", "<latslot>",
         "<parser>", "</parser>", "moves:", ";", "ask:", "cell", "rowsum", "read", "?", "|", "_",
         "ROT", "ROTL", "FLIPH", "FLIPV", "TR", "SWAPR", "SWAPC", "SHIFTR", "NOP",
         "0", "1", "2", "3", "4", "5", "6", "7", "8", "9")
ID = {w: i for i, w in enumerate(WORDS)}
PAD, BOS, EOS, IMGSLOT, LATSLOT = ID["<pad>"], ID["<bos>"], ID["<eos>"], ID["<imgslot>"], ID["<latslot>"]
VOCAB_SIZE = 48            # len(WORDS) = 39, rounded up (spare ids are never produced)

GRID = 3                   # 3 x 3 cells of 28 x 28 pixels: an 84 x 84 grey image
CELL = 28
IMAGE_SIZE = GRID * CELL
N_IMAGE = GRID * GRID      # one image token per cell (patch 28)
IMAGE_POS = tuple(range(2, 2 + N_IMAGE))
MAX_MOVES = 6
MOVE_TOKENS = 3
QUESTION_POS = 33
PROMPT_LEN = 37
LATENT_OPEN = PROMPT_LEN   # <latent> is the first response token; its slots follow
SEQ_LEN = 64               # PROMPT_LEN + <latent> + K=9 + </latent> + 13 parser + 2 answer + <eos> = 64


def latent_pos(k: int) -> tuple[int, ...]:
    """The K latent slots' positions (static: every latent row has the same prompt length)."""
    return tuple(range(LATENT_OPEN + 1, LATENT_OPEN + 1 + k))
