-- sysbench script: enginemig's default mix, 16 SELECT : 7 UPDATE : 1 INSERT by primary key,
-- autocommit, prepared statements, uniform keys. One query per event, so sysbench's tps is qps.
-- Used by bench/scripts/sweep.sh to check that enginemig bench measures what sysbench measures.
sysbench.cmdline.options = {
   table = {"table to run the mix on", "players_myisam"},
   max_id = {"largest id of the seeded rows", 2000000},
}

function thread_init()
   drv = sysbench.sql.driver()
   con = drv:connect()
   local t = sysbench.opt.table
   sel = con:prepare("SELECT id, level, coins, guild, last_seen, name FROM " .. t .. " WHERE id = ?")
   sel_id = sel:bind_create(sysbench.sql.type.INT)
   sel:bind_param(sel_id)
   upd = con:prepare("UPDATE " .. t .. " SET level = ? WHERE id = ?")
   upd_v = upd:bind_create(sysbench.sql.type.INT)
   upd_id = upd:bind_create(sysbench.sql.type.INT)
   upd:bind_param(upd_v, upd_id)
   ins = con:prepare("INSERT INTO " .. t .. " (level, coins, guild, last_seen, name) VALUES (?, ?, ?, ?, ?)")
   ins_a = ins:bind_create(sysbench.sql.type.INT)
   ins_b = ins:bind_create(sysbench.sql.type.INT)
   ins_c = ins:bind_create(sysbench.sql.type.INT)
   ins_d = ins:bind_create(sysbench.sql.type.INT)
   ins_e = ins:bind_create(sysbench.sql.type.CHAR, 40)
   ins:bind_param(ins_a, ins_b, ins_c, ins_d, ins_e)
end

function event()
   local n = sysbench.rand.uniform(1, 24)
   if n <= 16 then
      sel_id:set(sysbench.rand.uniform(1, sysbench.opt.max_id))
      sel:execute()
   elseif n <= 23 then
      upd_v:set(sysbench.rand.uniform(0, 99))
      upd_id:set(sysbench.rand.uniform(1, sysbench.opt.max_id))
      upd:execute()
   else
      ins_a:set(1)
      ins_b:set(0)
      ins_c:set(sysbench.rand.uniform(0, 4999))
      ins_d:set(0)
      ins_e:set("new-player")
      ins:execute()
   end
end

function thread_done()
   con:disconnect()
end
