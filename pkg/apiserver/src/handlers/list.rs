//! GET of a collection.
//!
//! A JSON list is written as it is sent ([`ListBody`]): the store hands out each object as its
//! stored bytes (for resources served as stored, without a selector) or as its JSON encoded
//! already (decoded first), and the body writes them between the list's head and tail chunk
//! by chunk, so that a list held for a client that reads slowly costs a reference per object,
//! not a copy of the answer.

use bytes::Bytes;
use genplane_apimachinery::errors::{ApiError, Status};
use genplane_storage::Storage;
use hyper::{Response, StatusCode};

use super::{Ctx, respond, respond_json};
use crate::body::{ListBody, ResponseBody};
use crate::encode;
use crate::negotiation::{Format, Target};

/// Answers a list: the list, a Table, or a PartialObjectMetadataList.
pub(crate) async fn list<S: Storage>(ctx: &Ctx<'_, S>) -> Result<Response<ResponseBody>, ApiError> {
    let negotiated = ctx.negotiate(true)?;
    let options = ctx.list_options(false)?;
    if negotiated.is_json_objects() {
        let mut items = Vec::new();
        let listed = ctx
            .store()?
            .list_json(&ctx.request.namespace, &options, &mut items)
            .await?;
        // The list without items, split where they go: the same bytes as the whole list
        // encoded at once (keys in order, no spaces).
        let empty = encode::serialize(&encode::list(ctx.info, listed), Format::Json, None)?;
        let at = empty
            .windows(ITEMS.len())
            .position(|w| w == ITEMS)
            .ok_or_else(|| Status::internal_error("encoding the list: no items"))?
            + ITEMS.len()
            - 1;
        let empty = Bytes::from(empty);
        let body = ResponseBody::List(ListBody::new(empty.slice(..at), items, empty.slice(at..)));
        return Ok(respond_json(StatusCode::OK, body, &negotiated));
    }
    let listed = ctx.store()?.list(&ctx.request.namespace, &options).await?;
    let body = match negotiated.target {
        Target::Table(version) => encode::table(
            ctx.info,
            &listed.items,
            Some(&listed),
            version,
            true,
            ctx.now,
        ),
        Target::PartialObjectMetadataList(version) | Target::PartialObjectMetadata(version) => {
            encode::partial_metadata_list(&listed, version)
        }
        Target::Object | Target::GroupDiscoveryList(_) => encode::list(ctx.info, listed),
    };
    Ok(respond(
        StatusCode::OK,
        &body,
        &negotiated,
        Some(ctx.info),
        &[],
    ))
}

/// Where a list's items go in its JSON: between the brackets.
const ITEMS: &[u8] = b"\"items\":[]";
