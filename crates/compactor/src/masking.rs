//! Where the compactor masks secrets ([`Secrets`], `[recall] secret_patterns`): in the sources a
//! summarizer is sent (an LLM provider never reads a pasted key, and an extractive summary
//! cannot copy one), in what a summarizer returns (the headline, body and facts, whoever wrote
//! them), and in the memories and messages a context shows besides the messages themselves
//! (the injected memories and the recalled block). The messages laid verbatim stay as sent.

use strata_seam::Memory;
use strata_seam::search::Recalled;
use strata_seam::secrets::Secrets;

use crate::summarizer::{SourceItem, Summary};

/// Masks the text and call arguments of a summarizer's sources.
pub(crate) fn sources(items: &mut [SourceItem], secrets: &Secrets) {
    for item in items {
        secrets.mask_in_place(&mut item.text);
        for call in &mut item.calls {
            secrets.mask_in_place(&mut call.arguments);
        }
    }
}

/// Masks a summary and the facts it proposes.
pub(crate) fn summary(mut summary: Summary, secrets: &Secrets) -> Summary {
    secrets.mask_in_place(&mut summary.headline);
    secrets.mask_in_place(&mut summary.body);
    for update in &mut summary.memory_updates {
        secrets.mask_in_place(&mut update.title);
        secrets.mask_in_place(&mut update.content);
    }
    summary
}

/// Masks a memory's title and content, as a context shows them.
pub(crate) fn memory(mut memory: Memory, secrets: &Secrets) -> Memory {
    secrets.mask_in_place(&mut memory.title);
    secrets.mask_in_place(&mut memory.content);
    memory
}

/// Masks the messages a search found for the recalled block.
pub(crate) fn recalled(recalled: &mut Recalled, secrets: &Secrets) {
    for hit in &mut recalled.hits {
        secrets.mask_in_place(&mut hit.text);
    }
}
