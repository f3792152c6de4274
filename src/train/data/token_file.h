// Token data folders (train.bin, val.bin, meta.json): the format lives in formats/token_file.h,
// with no libtorch so the fuzz tree reads it; the trainer names its types as its own.
#pragma once

#include "formats/token_file.h"

namespace gpulab::train {

using formats::token_dtype_for_vocab;
using formats::token_dtype_name;
using formats::token_meta_from_json;
using formats::token_meta_to_json;
using formats::token_width;
using formats::TokenData;
using formats::TokenDataOptions;
using formats::TokenDtype;
using formats::TokenFile;
using formats::TokenMeta;
using formats::TokenSplitMeta;
using formats::TokenWriter;

}  // namespace gpulab::train
