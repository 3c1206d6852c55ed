async def test_stop_interrupts_a_servers_kernel_through_its_rest_api_and_it_lives_on(
    start_server, fake: FakeLLM, jupyter_server: JupyterServer, tmp_path: Path
) -> None:
    kernel_id = await jupyter_server.start_kernel()
    notebook = await jupyter_server.users_notebook(kernel_id)
    try:
        await user_cell(notebook, "kept = 'still here'")
        client = await start_server(extra_env={"NOTEBOOK_TOKEN": jupyter_server.token})
        await client.initialize()
        client.permission_handler = allow_once
        kernel = {"server": jupyter_server.url, "kernelId": kernel_id, "tokenEnv": "NOTEBOOK_TOKEN"}
        session = await client.new_session(str(tmp_path), toolPolicy="sync", kernel=kernel)
        long_sleep = call("python_eval", code="import time\ntime.sleep(600)")
        fake.set_script([Reply(tool_calls=(long_sleep,))])
        prompt = asyncio.create_task(client.prompt(session, "Wait.", timeout=60))
        await client.wait_for_update(
            session, lambda u: u.get("status") == "in_progress", timeout=30
        )
        await asyncio.sleep(0.5)
        client.cancel(session)
        assert (await prompt)["stopReason"] == "cancelled"
        reply = await notebook.execute_interactive("assert kept == 'still here'", timeout=20)
        assert reply["content"]["status"] == "ok"  # interrupted, not killed or restarted
    finally:
        notebook.stop_channels()
