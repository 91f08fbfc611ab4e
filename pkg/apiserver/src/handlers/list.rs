//! GET of a collection.

use genplane_apimachinery::errors::ApiError;
use genplane_storage::Storage;
use hyper::{Response, StatusCode};

use super::{Ctx, respond};
use crate::body::ResponseBody;
use crate::encode;
use crate::negotiation::Target;

/// Answers a list: the list, a Table, or a PartialObjectMetadataList.
pub(crate) async fn list<S: Storage>(ctx: &Ctx<'_, S>) -> Result<Response<ResponseBody>, ApiError> {
    let negotiated = ctx.negotiate(true)?;
    let options = ctx.list_options(false)?;
    let listed = ctx.store.list(&ctx.request.namespace, &options).await?;
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
