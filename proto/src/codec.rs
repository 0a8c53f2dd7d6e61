//! The gRPC codec of the `onesided.v1` services: prost's encoding, and a decoder that reads each
//! message from one `Bytes` taken whole from tonic's buffer.
//!
//! tonic-prost's decoder hands prost the `BytesMut`-backed buffer, whose every step (a varint,
//! a tag) pays `BytesMut`'s offset bookkeeping; taking the message's bytes as `Bytes` first is
//! zero-copy (the buffer is split, not copied), its steps are a pointer bump, and `bytes`
//! fields stay slices of it as before (a bulk put is not copied).
//!
//! Owns: the `Codec` the generated clients and servers use (`build.rs`'s `codec_path`).
//! Must not: change what is on the wire or the status of a message that does not parse
//! (INTERNAL, as tonic-prost's).

use std::marker::PhantomData;

use bytes::Buf;
use prost::Message;
use tonic::codec::{DecodeBuf, Decoder};
use tonic::Status;
use tonic_prost::ProstEncoder;

/// The codec of every `onesided.v1` method.
#[derive(Debug, Clone)]
pub struct Codec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for Codec<T, U> {
    fn default() -> Self {
        Codec(PhantomData)
    }
}

impl<T, U> tonic::codec::Codec for Codec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = WholeDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstEncoder::default()
    }

    fn decoder(&mut self) -> Self::Decoder {
        WholeDecoder(PhantomData)
    }
}

/// Decodes a message from its bytes taken whole.
#[derive(Debug, Clone)]
pub struct WholeDecoder<U>(PhantomData<U>);

impl<U: Message + Default> Decoder for WholeDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        let message = buf.copy_to_bytes(buf.remaining());
        U::decode(message)
            .map(Some)
            .map_err(|error| Status::internal(error.to_string()))
    }
}
