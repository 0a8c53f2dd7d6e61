//! Identity through the real binary: tokens never reach its log, at any level, whether they
//! are right, wrong or used in the wrong place; the limit flags reach the server.

use onesided_client::{Admin, ErrorClass, LockType, Session, WindowSpec};
use tonic::Code;

use crate::{unique, TempDir};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_is_ever_logged() {
    let data = TempDir(std::env::temp_dir().join(unique("onesided-bin")));
    let admin_token = format!("admin-secret-{}", unique("t"));
    // the binary at trace level, through the launcher the secrets tests use
    let binary = crate::secrets::start(
        &data,
        &["--admin-token", &admin_token, "--max-ranks-per-world", "2"],
        "trace",
    );
    let url = binary.url.clone();
    let admin = Admin::connect(&url, &admin_token).await.unwrap();
    let world = admin.create_world("w", 2).await.unwrap();
    admin
        .create_window("w", &WindowSpec::of::<i64>("x", 2, 1))
        .await
        .unwrap();
    // the flag reached the server
    let big = admin.create_world("big", 3).await.unwrap_err();
    assert_eq!(
        (big.code(), big.class()),
        (Code::ResourceExhausted, Some(ErrorClass::NoMem))
    );
    let session = Session::attach(&url, &world.tokens[0]).await.unwrap();
    let window = session.window("x").await.unwrap();
    window.lock(LockType::Exclusive, 1, 0).await.unwrap();
    window.put(1, 0, &[5i64]).unwrap();
    window.unlock(1).await.unwrap();
    let wrong = format!("wrong-secret-{}", unique("t"));
    // what the Admin service says to `token`
    let list_worlds = |token: String| {
        let url = url.clone();
        async move {
            Admin::connect(&url, &token)
                .await
                .unwrap()
                .list_worlds()
                .await
        }
    };
    // each refusal has its one right code: an unknown token is UNAUTHENTICATED, a valid one
    // in the wrong place PERMISSION_DENIED
    let refusals = [
        (
            "an unknown rank token",
            Session::attach(&url, &wrong).await.map(|_| ()),
            Code::Unauthenticated,
        ),
        (
            "the admin token on the Rma service",
            Session::attach(&url, &admin_token).await.map(|_| ()),
            Code::PermissionDenied,
        ),
        (
            "an unknown admin token",
            list_worlds(wrong.clone()).await.map(|_| ()),
            Code::Unauthenticated,
        ),
        (
            "a rank token on the Admin service",
            list_worlds(world.tokens[1].clone()).await.map(|_| ()),
            Code::PermissionDenied,
        ),
    ];
    for (what, refusal, code) in refusals {
        let error = refusal.expect_err(what);
        assert_eq!(error.code(), code, "{what}: {error}");
    }
    drop(window);
    drop(session);
    // stopped by SIGTERM: the shutdown's lines are checked too
    let text = binary.stop().join("\n");
    // the log is at trace level: lines of that level are in it (an info line, such as
    // "session attached", would be there at the default level too)
    assert!(
        text.lines().any(|line| line.contains(" TRACE ")),
        "no trace line: the log is not at trace level"
    );
    let secrets = [&admin_token, &wrong, &world.tokens[0], &world.tokens[1]];
    for secret in secrets {
        assert!(!text.contains(secret.as_str()), "a token is in the log");
    }
}
