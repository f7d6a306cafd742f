%% SPDX-License-Identifier: MIT
%% Erlang gen_tcp echo for tests/integration/test_apps.py (row "erlang") and
%% bench/apps.py; compiled with erlc into build/apps/erlang.
%%
%%   erl -noshell -pa DIR -run echo main server CONNS
%%       gen_tcp:listen on 127.0.0.1, port 0 (prints "listening PORT"), a
%%       process per connection echoing until its peer closes; exits 0 after
%%       CONNS connections ended ("server conns=N bytes=B errors=E").
%%   erl -noshell -pa DIR -run echo main client PORT CONNS MESSAGES SIZE BIG LIMIT_S
%%       CONNS connections at once, each MESSAGES round trips of SIZE random
%%       bytes (the echo compared), then one connection streaming BIG bytes
%%       from another process while it reads the echo (MD5 compared).
%%       Prints "result ok=.. errors=.. messages=.. bytes=.. secs=..
%%       msg_per_s=.." and exits 0 iff every byte came back right; 3 if the
%%       run is not over after LIMIT_S seconds, with its progress.
-module(echo).
-export([main/1]).

opts() -> [binary, {packet, 0}, {active, false}, {nodelay, true}].

main(["server", Conns]) ->
    {ok, L} = gen_tcp:listen(0, [{ip, {127, 0, 0, 1}}, {reuseaddr, true}, {backlog, 128} | opts()]),
    {ok, Port} = inet:port(L),
    io:format("listening ~p~n", [Port]),
    Self = self(),
    spawn_link(fun() -> accept(L, Self) end),
    serve(list_to_integer(Conns), 0, 0, 0);
main(["client", Port, Conns, Messages, Size, Big, Limit]) ->
    [P, C, M, S, B, T] = [list_to_integer(X) || X <- [Port, Conns, Messages, Size, Big, Limit]],
    client(P, C, M, S, B, T);
main(_) ->
    io:format(standard_error, "usage: echo server CONNS | client PORT CONNS MESSAGES SIZE BIG LIMIT_S~n", []),
    halt(2).

accept(L, Parent) ->
    {ok, S} = gen_tcp:accept(L),
    Pid = spawn(fun() -> receive go -> echo(S, Parent, 0) end end),
    ok = gen_tcp:controlling_process(S, Pid),
    Pid ! go,
    accept(L, Parent).

echo(S, Parent, N) ->
    case gen_tcp:recv(S, 0) of
        {ok, Data} ->
            case gen_tcp:send(S, Data) of
                ok -> echo(S, Parent, N + byte_size(Data));
                {error, E} -> gen_tcp:close(S), Parent ! {ended, N, {send, E}}
            end;
        {error, closed} -> gen_tcp:close(S), Parent ! {ended, N, none};
        {error, E} -> gen_tcp:close(S), Parent ! {ended, N, {recv, E}}
    end.

serve(Want, Want, Bytes, Errors) ->
    io:format("server conns=~p bytes=~p errors=~p~n", [Want, Bytes, Errors]),
    halt(if Errors =:= 0 -> 0; true -> 1 end);
serve(Want, N, Bytes, Errors) ->
    receive
        {ended, B, none} -> serve(Want, N + 1, Bytes + B, Errors);
        {ended, B, E} ->
            io:format(standard_error, "server: ~p~n", [E]),
            serve(Want, N + 1, Bytes + B, Errors + 1)
    end.

client(Port, Conns, Messages, Size, Big, Limit) ->
    Self = self(),
    Progress = ets:new(progress, [public, set]),
    T0 = erlang:monotonic_time(),
    [spawn_link(fun() -> Self ! {done, Id, pingpong(Port, Id, Messages, Size, Limit, Progress)} end)
     || Id <- lists:seq(1, Conns)],
    Errs1 = collect(Conns, [], Limit, Progress, Messages),
    T1 = erlang:monotonic_time(),
    Errs2 = case Big > 0 andalso Errs1 =:= [] of
                true ->
                    spawn_link(fun() -> Self ! {done, big, stream(Port, Big, Limit, Progress)} end),
                    collect(1, Errs1, Limit, Progress, Messages);
                false -> Errs1
            end,
    Secs = secs(T0, erlang:monotonic_time()),
    Total = lists:sum([N || {Id, N} <- ets:tab2list(Progress), is_integer(Id)]),
    [io:format("error: ~s~n", [E]) || E <- lists:sublist(lists:reverse(Errs2), 20)],
    io:format("result ok=~s errors=~p messages=~p bytes=~p secs=~.3f msg_per_s=~p~n",
              [Errs2 =:= [], length(Errs2), Total, 2 * (Total * Size + Big), Secs,
               round(Total / secs(T0, T1))]),
    halt(if Errs2 =:= [] -> 0; true -> 1 end).

secs(A, B) -> erlang:convert_time_unit(B - A, native, microsecond) / 1.0e6.

collect(0, Errs, _, _, _) -> Errs;
collect(N, Errs, Limit, Progress, Messages) ->
    receive
        {done, _, ok} -> collect(N - 1, Errs, Limit, Progress, Messages);
        {done, _, {error, E}} -> collect(N - 1, [E | Errs], Limit, Progress, Messages)
    after Limit * 1000 ->
        io:format("hang: not over after ~p s; echoes per connection ~w of ~p, stream bytes echoed ~w~n",
                  [Limit, lists:sort(ets:tab2list(Progress)), Messages, ets:lookup(Progress, big)]),
        halt(3)
    end.

pingpong(Port, Id, Messages, Size, Limit, Progress) ->
    case gen_tcp:connect({127, 0, 0, 1}, Port, opts(), Limit * 1000) of
        {ok, S} ->
            ets:insert(Progress, {Id, 0}),
            R = rounds(S, Id, 0, Messages, Size, Limit, Progress),
            gen_tcp:close(S),
            R;
        {error, E} -> {error, io_lib:format("conn ~p: connect: ~p", [Id, E])}
    end.

rounds(_, _, M, M, _, _, _) -> ok;
rounds(S, Id, I, M, Size, Limit, Progress) ->
    Msg = rand:bytes(Size),
    ok = gen_tcp:send(S, Msg),
    case gen_tcp:recv(S, Size, Limit * 1000) of
        {ok, Msg} ->
            ets:insert(Progress, {Id, I + 1}),
            rounds(S, Id, I + 1, M, Size, Limit, Progress);
        {ok, _} -> {error, io_lib:format("conn ~p: echo of message ~p differs", [Id, I])};
        {error, E} -> {error, io_lib:format("conn ~p: message ~p: ~p", [Id, I, E])}
    end.

stream(Port, Big, Limit, Progress) ->
    {ok, S} = gen_tcp:connect({127, 0, 0, 1}, Port, opts(), Limit * 1000),
    Self = self(),
    spawn_link(fun() -> Self ! {sent, send_all(S, Big, erlang:md5_init())} end),
    Back = recv_all(S, 0, Big, erlang:md5_init(), Limit, Progress),
    gen_tcp:close(S),
    receive
        {sent, Sent} when Sent =:= Back -> ok;
        {sent, _} -> {error, "stream: the echo's MD5 differs"}
    end.

send_all(_, 0, Ctx) -> erlang:md5_final(Ctx);
send_all(S, Left, Ctx) ->
    Chunk = rand:bytes(min(Left, 65536)),
    ok = gen_tcp:send(S, Chunk),
    send_all(S, Left - byte_size(Chunk), erlang:md5_update(Ctx, Chunk)).

recv_all(_, Big, Big, Ctx, _, _) -> erlang:md5_final(Ctx);
recv_all(S, Got, Big, Ctx, Limit, Progress) ->
    case gen_tcp:recv(S, 0, Limit * 1000) of
        {ok, D} ->
            ets:insert(Progress, {big, Got + byte_size(D)}),
            recv_all(S, Got + byte_size(D), Big, erlang:md5_update(Ctx, D), Limit, Progress);
        {error, E} -> exit({stream, Got, E})
    end.
